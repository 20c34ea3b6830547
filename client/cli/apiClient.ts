/**
 * The few HTTP calls the command-line tools make, with the base URL and key from CAIRN_URL and
 * CAIRN_KEY. Errors carry the API's error JSON message.
 */
export interface ApiSettings {
  readonly baseUrl: string;
  readonly key: string;
}

export function apiSettingsFrom(env: NodeJS.ProcessEnv): ApiSettings {
  const baseUrl = env['CAIRN_URL']?.replace(/\/+$/, '');
  const key = env['CAIRN_KEY'];
  if (!baseUrl) throw new Error('CAIRN_URL is not set (e.g. http://127.0.0.1:7071)');
  if (!key) throw new Error('CAIRN_KEY is not set (an API key or an access token)');
  return { baseUrl, key };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function callApi(
  settings: ApiSettings,
  pathname: string,
  init: { method?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<Response> {
  const response = await fetch(`${settings.baseUrl}${pathname}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${settings.key}`, ...init.headers },
    ...(init.body === undefined ? {} : { body: init.body }),
  });
  return response;
}

/** The response, or an ApiError with the API's message when the status is not one of `ok`. */
export async function expectStatus(response: Response, ...ok: number[]): Promise<Response> {
  if (ok.includes(response.status)) return response;
  let message = `HTTP ${response.status}`;
  try {
    const body = (await response.json()) as { error?: { message?: string } };
    if (body.error?.message) message += `: ${body.error.message}`;
  } catch {
    // Not JSON: the status says enough.
  }
  throw new ApiError(response.status, message);
}
