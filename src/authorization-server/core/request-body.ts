/**
 * Bounded reads of request bodies: form bodies (OAuth 2.1 §3.2) and JSON objects (RFC 7591 §3.1),
 * with their media types checked.
 */
import { declaresMoreThan, readRequestUpTo, TOO_LARGE } from "../../shared/bounded-body.js";
import { OAuthError } from "../../shared/errors.js";
import { mediaType } from "../../shared/media-type.js";

/** Largest form or JSON body an endpoint reads (a token request is a few hundred bytes). */
export const MAX_BODY_BYTES = 64 * 1024;

/** One decoder for every body: a call without `stream` starts from a clean state (Encoding §7.2). */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Reads at most `maxBytes` of the body as UTF-8; more is an `invalid_request` (413), never a 500. The
 * declared `Content-Length` is checked first so a huge upload is refused before it is read. `label`
 * names the body in the error descriptions ("request body", "form body").
 */
export async function readCappedText(
  request: Request,
  maxBytes: number,
  label = "request body",
): Promise<string> {
  const tooLarge = () =>
    new OAuthError("invalid_request", { description: `${label} is too large`, status: 413 });
  if (declaresMoreThan(request.headers, maxBytes)) throw tooLarge();
  let bytes: Uint8Array | typeof TOO_LARGE;
  try {
    bytes = await readRequestUpTo(request, maxBytes);
  } catch (error) {
    // The adapter errors the stream when its own cap is passed or the client goes away.
    throw new OAuthError("invalid_request", {
      description: `${label} could not be read`,
      detail: error instanceof Error ? error.message : String(error),
    });
  }
  if (bytes === TOO_LARGE) throw tooLarge();
  try {
    return STRICT_UTF8.decode(bytes);
  } catch {
    throw new OAuthError("invalid_request", { description: `${label} is not valid UTF-8` });
  }
}

/** The request's media type, lower-cased, without parameters. */
export function requestMediaType(request: Request): string {
  return mediaType(request.headers.get("content-type"));
}

/**
 * Reads an `application/x-www-form-urlencoded` body (RFC 6749 §3.2: the token endpoint takes only
 * this encoding). Parameters without a value are treated as omitted (RFC 6749 §3.1); a parameter
 * that appears twice is an `invalid_request` (RFC 6749 §3.1: "MUST NOT be included more than once").
 */
export async function readForm(request: Request, maxBytes = MAX_BODY_BYTES): Promise<Map<string, string>> {
  if (requestMediaType(request) !== "application/x-www-form-urlencoded") {
    throw new OAuthError("invalid_request", {
      description: "request body must be application/x-www-form-urlencoded",
    });
  }
  const text = await readCappedText(request, maxBytes);
  const form = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(text)) {
    if (form.has(name)) {
      throw new OAuthError("invalid_request", { description: `parameter ${safeName(name)} is repeated` });
    }
    form.set(name, value);
  }
  // RFC 6749 §3.1: "Parameters sent without a value MUST be treated as if they were omitted."
  for (const [name, value] of form) if (value === "") form.delete(name);
  return form;
}

/** Reads an `application/json` object body (RFC 7591 §3.1). */
export async function readJsonObject(
  request: Request,
  maxBytes = MAX_BODY_BYTES,
  errorCode: "invalid_request" | "invalid_client_metadata" = "invalid_request",
): Promise<Record<string, unknown>> {
  if (requestMediaType(request) !== "application/json") {
    throw new OAuthError("invalid_request", { description: "request body must be application/json" });
  }
  const text = await readCappedText(request, maxBytes);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new OAuthError(errorCode, { description: "request body is not valid JSON" });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new OAuthError(errorCode, { description: "request body must be a JSON object" });
  }
  return value as Record<string, unknown>;
}

/** A parameter name fit for an error description (names come from the client, so they are bounded). */
function safeName(name: string): string {
  return /^[A-Za-z0-9_.-]{1,40}$/.test(name) ? name : "(unnamed)";
}
