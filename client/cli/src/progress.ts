/** Progress on stderr, shared by the commands that move files: shown on a terminal only. */

export function mb(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** One self-overwriting line on a terminal, at most five times a second; nothing elsewhere. */
export function progressLine(stream: NodeJS.WritableStream & { isTTY?: boolean }) {
  let last = 0;
  let shown = false;
  const show = (line: string) => {
    if (stream.isTTY !== true) return;
    const now = Date.now();
    if (now - last < 200) return;
    last = now;
    shown = true;
    stream.write(`\r\u001b[K${line}`);
  };
  show.end = () => {
    if (shown) stream.write('\r\u001b[K');
    shown = false;
  };
  return show;
}
