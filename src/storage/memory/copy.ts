/**
 * Copies of the memory store's records on the way out, so callers cannot mutate the stored state
 * through a returned object.
 */
import { withoutUndefined } from "../rules.js";

/** Deep copy that also drops `undefined` properties, so every backend returns the same shapes. */
export function copy<T>(value: T): T {
  return withoutUndefined(structuredClone(value));
}

/**
 * A verdict's answer (../rules.ts) with every record and list in it copied, so the caller cannot
 * reach a stored record through it; an error (an `OAuthError` of `check`) is passed as it is.
 */
export function detached<R extends object>(result: R): R {
  const out = { ...result } as Record<string, unknown>;
  for (const [name, value] of Object.entries(out)) {
    if (typeof value === "object" && value !== null && !(value instanceof Error)) out[name] = copy(value);
  }
  return out as R;
}
