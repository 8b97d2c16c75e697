/**
 * Bounded reads of bodies another party sends (SECURITY.md: bounded reads of anything remote): the
 * one read loop every role uses. Each caller turns {@link TOO_LARGE} into its own error (an OAuth
 * 413, a JSON-RPC answer, a check finding); a failing stream's error reaches the caller as it was.
 */

/** What {@link readUpTo} answers for a body past its limit. */
export const TOO_LARGE: unique symbol = Symbol("body too large");

/**
 * Whether `headers` declare a `Content-Length` above `limit`, so a huge body is refused before a
 * byte of it is read. Only a plain decimal counts; anything else is left to the counted read.
 */
export function declaresMoreThan(headers: Headers, limit: number): boolean {
  const declared = headers.get("content-length");
  return declared !== null && /^\s*\d+\s*$/.test(declared) && Number(declared) > limit;
}

/**
 * Reads `body` to its end, at most `limit` bytes counted as they arrive (a declared length can
 * lie); past that the stream is cancelled and {@link TOO_LARGE} answered. An absent body is empty.
 */
export async function readUpTo(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<Uint8Array | typeof TOO_LARGE> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      return TOO_LARGE;
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/**
 * Implemented by a request that can read its own body, bounded, without a web stream: the node
 * listener's lazy request (http/lazy-request.ts) reads the `IncomingMessage` directly. Called with
 * the caller's limit, it answers as {@link readUpTo} would on `request.body` and marks the body
 * used, or answers undefined when it cannot (its stream was already made, the request was built,
 * it has no body), and then the caller reads `request.body`.
 */
export const READ_BODY_UP_TO: unique symbol = Symbol("gatehouse.readBodyUpTo");

/** A request that may read its own body ({@link READ_BODY_UP_TO}). */
interface SelfReadingRequest {
  [READ_BODY_UP_TO]?: (limit: number) => Promise<Uint8Array | typeof TOO_LARGE> | undefined;
}

/**
 * {@link readUpTo} on a request's body: directly from the connection where the request can
 * ({@link READ_BODY_UP_TO}; no `ReadableStream`, reader or promise per chunk), else `request.body`.
 */
export function readRequestUpTo(request: Request, limit: number): Promise<Uint8Array | typeof TOO_LARGE> {
  return (request as SelfReadingRequest)[READ_BODY_UP_TO]?.(limit) ?? readUpTo(request.body, limit);
}

/** One decoder for every body read as text: a call without `stream` starts clean (Encoding §7.2). */
const UTF8 = new TextDecoder();

/** Bytes as UTF-8 (malformed sequences replaced, as `Response.text()` does); TOO_LARGE as it is. */
function decoded(bytes: Uint8Array | typeof TOO_LARGE): string | typeof TOO_LARGE {
  return bytes === TOO_LARGE ? TOO_LARGE : UTF8.decode(bytes);
}

/** {@link readRequestUpTo} decoded as UTF-8. */
export async function readRequestTextUpTo(
  request: Request,
  limit: number,
): Promise<string | typeof TOO_LARGE> {
  return decoded(await readRequestUpTo(request, limit));
}

/** {@link readUpTo} decoded as UTF-8. */
export async function readTextUpTo(
  body: ReadableStream<Uint8Array> | null,
  limit: number,
): Promise<string | typeof TOO_LARGE> {
  return decoded(await readUpTo(body, limit));
}
