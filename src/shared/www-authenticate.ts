/**
 * `WWW-Authenticate` parsing and building (RFC 9110 §11.6.1, RFC 6750 §3).
 */
import { GatehouseTypeError } from "./errors.js";

/** One challenge of a `WWW-Authenticate` header (RFC 9110 §11.6.1). */
export interface Challenge {
  /** As sent; compare with {@link Challenge.scheme} lowercased (schemes are case-insensitive). */
  scheme: string;
  /** Parameter names lowercased (they are case-insensitive); values unquoted and unescaped. */
  params: Record<string, string>;
  token68?: string;
}

const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;

/**
 * Parses a `WWW-Authenticate` field value into its challenges (RFC 9110 §11.6.1): several challenges
 * in one value, quoted strings with backslash escapes, token68, case-insensitive scheme and parameter
 * names. A parameter that appears twice in one challenge makes the challenge invalid (RFC 9110
 * §11.2), and a malformed value yields the challenges parsed before the fault (the faulty one is
 * dropped, never returned half-parsed). Never throws.
 */
export function parseWWWAuthenticate(value: string): Challenge[] {
  const challenges: Challenge[] = [];
  let i = 0;
  const n = value.length;
  const skipWs = () => {
    while (i < n && (value[i] === " " || value[i] === "\t")) i++;
  };
  const readToken = (): string => {
    const start = i;
    while (i < n && TCHAR.test(value[i]!)) i++;
    return value.slice(start, i);
  };
  const readQuoted = (): string | undefined => {
    // value[i] === '"'
    i++;
    let out = "";
    while (i < n) {
      const c = value[i]!;
      if (c === "\\") {
        if (i + 1 >= n) return undefined;
        out += value[i + 1];
        i += 2;
      } else if (c === '"') {
        i++;
        return out;
      } else {
        out += c;
        i++;
      }
    }
    return undefined;
  };

  // A challenge with a repeated parameter is dropped whichever way its parameter list ends.
  const close = (challenge: Challenge, valid: boolean) => {
    if (!valid && challenges[challenges.length - 1] === challenge) challenges.pop();
  };

  outer: while (i < n) {
    while (i < n && (value[i] === "," || value[i] === " " || value[i] === "\t")) i++;
    if (i >= n) break;
    const scheme = readToken();
    if (!scheme) break;
    // Null prototype: a hostile parameter named `__proto__` or `constructor` is just data.
    const challenge: Challenge = { scheme, params: Object.create(null) as Record<string, string> };
    const seen = new Set<string>();
    let valid = true;
    challenges.push(challenge);
    if (i >= n) break;
    if (value[i] !== " " && value[i] !== "\t" && value[i] !== ",") {
      // Garbage glued to the scheme name: the challenge is malformed.
      challenges.pop();
      break;
    }
    skipWs();
    // token68: the whole element up to a comma or the end, and not the start of `name=value`.
    const t68 = /^([A-Za-z0-9\-._~+/]+=*)[ \t]*(?=,|$)/.exec(value.slice(i));
    if (t68) {
      challenge.token68 = t68[1]!;
      i += t68[0].length;
      continue;
    }
    // auth-params, until a token not followed by "=" (which starts the next challenge).
    while (i < n) {
      skipWs();
      if (value[i] === ",") {
        i++;
        continue;
      }
      const save = i;
      const name = readToken();
      if (!name) {
        close(challenge, valid);
        if (i < n && challenges[challenges.length - 1] === challenge) challenges.pop();
        break outer;
      }
      skipWs();
      if (value[i] !== "=") {
        // Start of the next challenge.
        close(challenge, valid);
        i = save;
        continue outer;
      }
      i++;
      skipWs();
      let paramValue: string | undefined;
      if (value[i] === '"') paramValue = readQuoted();
      else {
        paramValue = readToken();
        if (paramValue === "") paramValue = undefined;
      }
      if (paramValue === undefined) {
        challenges.pop();
        break outer;
      }
      const key = name.toLowerCase();
      if (seen.has(key)) valid = false;
      seen.add(key);
      challenge.params[key] = paramValue;
      skipWs();
      if (i < n && value[i] !== ",") {
        // Two parameters without a comma between them: malformed.
        challenges.pop();
        break outer;
      }
    }
    close(challenge, valid);
  }
  return challenges;
}

/** The first challenge whose scheme equals `scheme`, case-insensitively. */
export function findChallenge(challenges: readonly Challenge[], scheme: string): Challenge | undefined {
  const wanted = scheme.toLowerCase();
  return challenges.find((c) => c.scheme.toLowerCase() === wanted);
}

function quote(value: string): string {
  // RFC 9110 §5.6.4 qdtext / quoted-pair: HTAB, SP, VCHAR, obs-text. CR/LF would split the header.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: header injection guard
  if (/[\u0000-\u0008\u000a-\u001f\u007f]|[^\u0000-\u00ff]/.test(value)) {
    throw new GatehouseTypeError(
      "ERR_INVALID_HEADER_VALUE",
      "challenge parameter values must not contain CR, LF, control or non-Latin-1 characters",
    );
  }
  return `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/**
 * Builds one challenge. Values are always sent as quoted strings with `"` and `\` escaped; CR, LF
 * and other control characters are refused (header injection). Parameters whose value is
 * `undefined` are left out, so callers can pass optional ones directly.
 */
export function buildChallenge(scheme: string, params: Record<string, string | undefined> = {}): string {
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(scheme)) {
    throw new GatehouseTypeError("ERR_INVALID_HEADER_VALUE", "challenge scheme must be a token");
  }
  const parts: string[] = [];
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) {
      throw new GatehouseTypeError("ERR_INVALID_HEADER_VALUE", "challenge parameter names must be tokens");
    }
    parts.push(`${name}=${quote(value)}`);
  }
  return parts.length ? `${scheme} ${parts.join(", ")}` : scheme;
}
