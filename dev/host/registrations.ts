import Module from 'node:module';

/**
 * Captures the app's own function registrations without the Functions host. `@azure/functions`
 * registers each function with the host through the `@azure/functions-core` module, which only the
 * host provides; installing a stand-in for it before the app registers makes every
 * `registerFunction(metadata, handler)` call land here, with the very bindings the host would get
 * (route, methods, schedule, orchestration and activity triggers). Nothing is declared twice.
 */

export interface Binding {
  readonly type: string;
  readonly direction: string;
  readonly route?: string;
  readonly methods?: string[];
  readonly schedule?: string;
  readonly runOnStartup?: boolean;
  readonly [property: string]: unknown;
}

export interface Registration {
  readonly name: string;
  readonly trigger: Binding;
  readonly bindings: Readonly<Record<string, Binding>>;
  readonly handler: (...args: unknown[]) => unknown;
}

interface CoreMetadata {
  name: string;
  bindings: Record<string, Binding>;
}

type Load = (request: string, parent: unknown, isMain: boolean) => unknown;

/** A hook the app registered (`app.hook.appStart(...)`), called as the host calls it. */
export interface AppHook {
  readonly name: string;
  readonly callback: (coreContext: { hookData: Record<string, unknown> }) => unknown;
}

let captured: Registration[] | undefined;
let capturedHooks: AppHook[] | undefined;

const functionsCore = {
  setProgrammingModel(): void {},
  getProgrammingModel(): undefined {
    return undefined;
  },
  registerFunction(metadata: CoreMetadata, handler: Registration['handler']): { dispose(): void } {
    const trigger = Object.values(metadata.bindings).find((binding) => /trigger$/i.test(binding.type));
    if (trigger === undefined) throw new Error(`function ${metadata.name} has no trigger`);
    captured?.push({ name: metadata.name, trigger, bindings: metadata.bindings, handler });
    return { dispose() {} };
  },
  registerHook(name: string, callback: AppHook['callback']): { dispose(): void } {
    capturedHooks?.push({ name, callback });
    return { dispose() {} };
  },
};

/**
 * Loads the app's entry module (package.json `main`) and returns what it registered. The entry may
 * throw (e.g. a configuration error); that is the app refusing to start, and it propagates.
 */
export function loadRegistrations(entry: string): Registration[] {
  return loadApp(entry).registrations;
}

/** {@link loadRegistrations}, with the hooks the app registered (app start and the others). */
export function loadApp(entry: string): { registrations: Registration[]; hooks: AppHook[] } {
  const moduleWithLoad = Module as unknown as { _load: Load };
  const original = moduleWithLoad._load;
  const registrations: Registration[] = [];
  const hooks: AppHook[] = [];
  captured = registrations;
  capturedHooks = hooks;
  moduleWithLoad._load = function (request, parent, isMain) {
    if (request === '@azure/functions-core') return functionsCore;
    return original.call(this, request, parent, isMain);
  };
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the host loads `main` with require too
    require(entry);
    return { registrations, hooks };
  } finally {
    captured = undefined;
    capturedHooks = undefined;
  }
}
