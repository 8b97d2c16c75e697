/**
 * Bounded reads of everything remote (SECURITY.md, "bounded reads of anything remote"): each body
 * the client reads for itself is read as a stream against the cap of the document it should be,
 * and abandoned (reader cancelled, which drops the connection) as soon as it passes the cap; a
 * declared `Content-Length` over the cap is refused before a byte is read. Token values in token
 * responses have their own cap, checked before anything parses or uses them.
 *
 * This module is the one place these rules live: `http.ts` applies them to the client's own
 * requests and to the fetch it hands oauth4webapi. The caller's resource requests are never
 * capped here: their bodies belong to the caller.
 */
import { AuthorizationFlowError } from "../errors.js";

const KiB = 1024;

/**
 * Per-document caps, in bytes of the decoded body. Each is far above what real servers send
 * (metadata and registration responses are a few KiB) and far below what would hurt a process.
 */
const BODY_CAPS = {
  /** RFC 9728 §3.2: a handful of URLs and lists. */
  "protected resource metadata": 64 * KiB,
  /**
   * RFC 8414 §3.2 / OpenID Connect Discovery §4.2: the largest kind of document here (OpenID
   * providers list every claim, algorithm and endpoint they support), so twice the others.
   */
  "authorization server metadata": 128 * KiB,
  /** RFC 7591 §3.2.1: the client metadata echoed back, plus credentials. */
  "registration response": 64 * KiB,
  /** RFC 6749 §5.1: room for three tokens at their cap (below) and the other members. */
  "token response": 64 * KiB,
  /** RFC 8693 §2.2: the enterprise identity provider's answer, shaped like a token response. */
  "token exchange response": 64 * KiB,
  /** RFC 8628 §3.2: two codes, two URIs and two numbers. */
  "device authorization response": 16 * KiB,
  /** RFC 7009 §2.2: the content of a 200 is ignored; an error is a few members. */
  "revocation response": 16 * KiB,
} as const;

export type RemoteDocument = keyof typeof BODY_CAPS;

/**
 * Cap on each token value (`access_token`, `refresh_token`, `id_token`). Real access tokens are
 * JWTs of 1-4 KiB even with many claims (providers move large group lists out of the token for
 * this reason); 16 KiB is four times that. An access token travels in a request header, and
 * common servers refuse larger header sections (Node's default limit for all headers together is
 * 16 KiB; nginx's default buffer for one header line is 8 KiB), so a longer token could not be
 * used anyway and is more likely an attack on the client or on the resources it calls.
 */
export const TOKEN_LENGTH_CAP = 16 * KiB;

/** The documents whose token members are checked against {@link TOKEN_LENGTH_CAP}. */
const TOKEN_BEARING: ReadonlySet<RemoteDocument> = new Set(["token response", "token exchange response"]);
const TOKEN_MEMBERS = ["access_token", "refresh_token", "id_token"] as const;

export function bodyCap(document: RemoteDocument): number {
  return BODY_CAPS[document];
}

function formatBytes(bytes: number): string {
  return bytes % KiB === 0 ? `${bytes / KiB} KiB` : `${bytes} bytes`;
}

/** The URL as errors name it: never a query string (it could carry something private). */
function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return "(invalid URL)";
  }
}

function tooLarge(
  document: RemoteDocument,
  url: string,
  step: string,
  status: number,
): AuthorizationFlowError {
  return new AuthorizationFlowError(
    "response_too_large",
    `the ${document} at ${displayUrl(url)} is larger than ${formatBytes(bodyCap(document))}; not read further`,
    { kind: "nonconforming", step, status },
  );
}

/** Cancels a body we will not read, which makes fetch drop the connection instead of draining it. */
async function abandon(body: ReadableStream<Uint8Array> | ReadableStreamDefaultReader<Uint8Array>) {
  try {
    await body.cancel();
  } catch {
    // already errored or closed: nothing left to release
  }
}

/**
 * Reads the body of `response` (the `document` fetched from `url`) up to its cap. Throws
 * `response_too_large` when the declared length or the bytes received pass the cap, after
 * cancelling the body; `transport_failed` when the connection breaks mid-body. For token-bearing
 * documents the token members are then checked (see {@link assertTokenLengths}).
 */
export async function readCappedBody(
  response: Response,
  document: RemoteDocument,
  url: string,
  step: string,
): Promise<Uint8Array<ArrayBuffer>> {
  const cap = bodyCap(document);
  const declared = response.headers.get("content-length");
  if (declared !== null && /^\s*\d+\s*$/.test(declared) && Number(declared) > cap) {
    if (response.body) await abandon(response.body);
    throw tooLarge(document, url, step, response.status);
  }
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch (cause) {
      throw new AuthorizationFlowError(
        "transport_failed",
        `the connection to ${new URL(url).origin} broke while reading the ${document}`,
        { kind: "transport", step, cause, url: displayUrl(url) },
      );
    }
    if (chunk.done) break;
    received += chunk.value.byteLength;
    if (received > cap) {
      await abandon(reader);
      throw tooLarge(document, url, step, response.status);
    }
    chunks.push(chunk.value);
  }
  const body = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  if (TOKEN_BEARING.has(document)) assertTokenLengths(body, document, url, step, response.status);
  return body;
}

/**
 * Refuses a token-bearing body whose `access_token`, `refresh_token` or `id_token` is longer than
 * {@link TOKEN_LENGTH_CAP}. Runs on the raw body, before oauth4webapi or our code parses a token
 * or presents one. A body that is not a JSON object is left to the response processing to refuse.
 */
function assertTokenLengths(
  body: Uint8Array,
  document: RemoteDocument,
  url: string,
  step: string,
  status: number,
): void {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(body).toString("utf8"));
  } catch {
    return;
  }
  if (typeof parsed !== "object" || parsed === null) return;
  for (const member of TOKEN_MEMBERS) {
    const value = (parsed as Record<string, unknown>)[member];
    if (typeof value === "string" && Buffer.byteLength(value) > TOKEN_LENGTH_CAP) {
      throw new AuthorizationFlowError(
        "response_too_large",
        `the ${member} in the ${document} at ${displayUrl(url)} is longer than ${formatBytes(TOKEN_LENGTH_CAP)}; refused`,
        { kind: "nonconforming", step, status },
      );
    }
  }
}

/** Statuses whose responses cannot carry a body (Fetch: "null body status"). */
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);

/**
 * A copy of `response` whose body has been read under the cap of `document`: what the fetch
 * handed to oauth4webapi returns, so every body it reads is bounded however it reads it.
 */
export async function cappedResponse(
  response: Response,
  document: RemoteDocument,
  url: string,
  step: string,
): Promise<Response> {
  const body = await readCappedBody(response, document, url, step);
  return new Response(NULL_BODY_STATUSES.has(response.status) ? null : body, {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
}
