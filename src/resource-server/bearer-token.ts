/**
 * Extracting the bearer token from a request (RFC 6750 §2, spec "Access token usage").
 */
import { invalidRequest } from "./errors.js";

// RFC 6750 §2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
// RFC 9110 §11.4: credentials = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
const SCHEME = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+)(?: +(.*))?$/s;

const FORM = "application/x-www-form-urlencoded";

/**
 * The bearer token in the `Authorization` header, `undefined` when the request carries no
 * credentials or credentials of another scheme (RFC 6750 §3.1: no error code then).
 *
 * Throws `invalid_request` (400) for a malformed header, and for a token in the query string or
 * a form body: the spec forbids the query (MUST NOT) and Gatehouse supports the header method only
 * (`bearer_methods_supported: ["header"]`); such a token is never validated.
 */
export async function extractBearerToken(request: Request): Promise<string | undefined> {
  const token = bearerTokenFromHeader(request);
  if (mayCarryFormToken(request) && (await formHasToken(request))) {
    throw invalidRequest("Access tokens are not accepted in the request body", "token in form body");
  }
  return token;
}

/**
 * The synchronous part of {@link extractBearerToken}: the query-string refusal and the
 * `Authorization` header, without looking at a body.
 */
export function bearerTokenFromHeader(request: Request): string | undefined {
  // Cheap substring test first: the URL is only parsed when it may carry the parameter.
  const url = request.url;
  if (url.includes("access_token") && new URL(url).searchParams.has("access_token")) {
    throw invalidRequest("Access tokens are not accepted in the query string", "token in query");
  }
  const header = request.headers.get("authorization");
  if (header === null) return undefined;
  // Fast path for the common, well-formed case: "Bearer " + b64token.
  if (header.startsWith("Bearer ") && B64TOKEN.test(header.slice(7))) return header.slice(7);
  const match = SCHEME.exec(header.trim());
  if (!match) throw invalidRequest("Malformed Authorization header", "authorization header syntax");
  // RFC 9110 §11.1: the scheme name is case-insensitive.
  if (match[1]!.toLowerCase() !== "bearer") return undefined;
  const token = match[2];
  // Several Authorization headers are folded with ", " by Headers and fail here.
  if (token === undefined || !B64TOKEN.test(token)) {
    throw invalidRequest("Malformed Authorization header", "bearer credentials syntax");
  }
  return token;
}

/** True when the request has a form-encoded body, which must be checked for `access_token`. */
export function mayCarryFormToken(request: Request): boolean {
  return request.body !== null && isForm(request);
}

function isForm(request: Request): boolean {
  const type = request.headers.get("content-type");
  return type !== null && type.toLowerCase().split(";")[0]!.trim() === FORM;
}

async function formHasToken(request: Request): Promise<boolean> {
  // A clone tees the body, so the handler still reads it in full.
  const text = await request.clone().text();
  return new URLSearchParams(text).has("access_token");
}
