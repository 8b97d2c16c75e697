/**
 * Scope tokens (RFC 6749 §3.3) and the scope hierarchy (a broader scope implies narrower ones).
 */
import { GatehouseTypeError } from "./errors.js";

/** RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

export function isScopeToken(value: string): boolean {
  return SCOPE_TOKEN.test(value);
}

/**
 * Parses a space-delimited scope string (RFC 6749 §3.3) into a set, in first-seen order. Runs of
 * spaces are tolerated; any other invalid character throws `ERR_INVALID_SCOPE`.
 */
export function parseScope(value: string | undefined | null): Set<string> {
  const out = new Set<string>();
  if (!value) return out;
  for (const part of value.split(" ")) {
    if (part === "") continue;
    if (!SCOPE_TOKEN.test(part)) {
      throw new GatehouseTypeError(
        "ERR_INVALID_SCOPE",
        "scope contains a character RFC 6749 §3.3 does not allow",
      );
    }
    out.add(part);
  }
  return out;
}

/** Formats scopes as one space-delimited string, in the given order. */
export function formatScope(scopes: Iterable<string>): string {
  return [...new Set(scopes)].join(" ");
}

export function union(...sets: Iterable<string>[]): Set<string> {
  const out = new Set<string>();
  for (const s of sets) for (const v of s) out.add(v);
  return out;
}

export function difference(a: Iterable<string>, b: Iterable<string>): Set<string> {
  const remove = new Set(b);
  return new Set([...a].filter((v) => !remove.has(v)));
}

export function intersection(a: Iterable<string>, b: Iterable<string>): Set<string> {
  const keep = new Set(b);
  return new Set([...a].filter((v) => keep.has(v)));
}

/**
 * A declared scope hierarchy: each key implies the scopes it maps to, transitively
 * (`{ "notes:admin": ["notes:write"], "notes:write": ["notes:read"] }`).
 *
 * The 2026-07-28 revision says the resource server MUST honour scope hierarchy when it judges
 * whether a token suffices; every "is this enough" question in Gatehouse goes through
 * {@link ScopeHierarchy.missing}.
 */
export class ScopeHierarchy {
  readonly #implies: Map<string, readonly string[]>;

  constructor(implies: Readonly<Record<string, readonly string[]>> = {}) {
    this.#implies = new Map();
    for (const [broad, narrower] of Object.entries(implies)) {
      for (const s of [broad, ...narrower]) {
        if (!SCOPE_TOKEN.test(s)) {
          throw new GatehouseTypeError("ERR_INVALID_SCOPE", `scope hierarchy names an invalid scope token`);
        }
      }
      this.#implies.set(broad, [...narrower]);
    }
  }

  /** True when `scope` appears in the hierarchy, as a broader or a narrower scope. */
  knows(scope: string): boolean {
    if (this.#implies.has(scope)) return true;
    for (const narrower of this.#implies.values()) if (narrower.includes(scope)) return true;
    return false;
  }

  /** Every scope implied by `granted`, the granted ones included (cycles are harmless). */
  expand(granted: Iterable<string>): Set<string> {
    const out = new Set<string>();
    const stack = [...granted];
    while (stack.length) {
      const s = stack.pop()!;
      if (out.has(s)) continue;
      out.add(s);
      for (const n of this.#implies.get(s) ?? []) if (!out.has(n)) stack.push(n);
    }
    return out;
  }

  /** The required scopes that `granted` does not cover, directly or through the hierarchy. */
  missing(granted: Iterable<string>, required: Iterable<string>): Set<string> {
    const have = this.expand(granted);
    return new Set([...required].filter((s) => !have.has(s)));
  }

  /** True when `granted` covers every scope in `required`. */
  satisfies(granted: Iterable<string>, required: Iterable<string>): boolean {
    return this.missing(granted, required).size === 0;
  }
}
