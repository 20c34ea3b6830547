/**
 * Node arguments that make a child process stop once its parent is gone, however the parent ended
 * (SIGKILL, a crash before any clean-up ran). The child's stdin must be a pipe from the parent,
 * which the parent never writes to nor closes: when the parent dies the pipe reaches its end, and
 * the child sends itself SIGTERM, so that its own handler (Azurite's, the local runtime's) stops
 * it as a Ctrl-C would. Azurite, `npm start` under test and the apps the tests and benches start
 * are spawned with it: none outlives what started it.
 */
const WATCH = "process.stdin.on('end',()=>process.kill(process.pid,'SIGTERM'));process.stdin.resume();";

export const EXIT_WITH_PARENT: readonly string[] = [
  '--import',
  `data:text/javascript,${encodeURIComponent(WATCH)}`,
];
