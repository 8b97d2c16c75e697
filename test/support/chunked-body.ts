/**
 * A request body of `parts` for `fetch` (with `duplex: "half"`): sent with chunked framing, so no
 * Content-Length lets a cap refuse it before reading, and each part arrives as its own chunk.
 */
function chunked(parts: string[]): ReadableStream<Uint8Array> {
  const rest = [...parts];
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = rest.shift();
      if (next === undefined) controller.close();
      else controller.enqueue(new TextEncoder().encode(next));
    },
  });
}

/** POSTs `parts` to `url` as a chunked body ({@link chunked}), with `headers`. */
export function postChunked(
  url: string,
  parts: string[],
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, { method: "POST", headers, body: chunked(parts), duplex: "half" } as RequestInit);
}
