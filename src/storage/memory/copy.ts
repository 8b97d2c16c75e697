import { withoutUndefined } from "../rules.js";

/** Deep copy that also drops `undefined` properties, so every backend returns the same shapes. */
export function copy<T>(value: T): T {
  return withoutUndefined(structuredClone(value));
}
