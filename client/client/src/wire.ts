/**
 * The client's types of what it sends and reads come from the route specs (@cairn-state/protocol):
 * `Wire<z.output<typeof Schema>>` is a spec's schema as the client hands it out, read-only all
 * the way down.
 */
export type Wire<T> = T extends (infer U)[]
  ? readonly Wire<U>[]
  : T extends object
    ? { readonly [K in keyof T]: Wire<T[K]> }
    : T;
