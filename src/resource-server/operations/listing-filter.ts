/**
 * The optional listing filter (SEP-1881, open): the results of `tools/list`, `resources/list`,
 * `resources/templates/list` and `prompts/list` keep only what the token may call, in a JSON
 * response and in an SSE stream alike (MCP transport spec, Streamable HTTP: a POST may be answered
 * either way). Only the responses to the listing requests of the body are touched, found by their
 * JSON-RPC id; everything else passes byte for byte. An item without a name the policy can judge
 * is left out (fail closed).
 */

import { boundedText } from "../authorization-server-request.js";

export type ListingKind = "tools" | "resources" | "resourceTemplates" | "prompts";

const LISTINGS: Readonly<Record<string, ListingKind>> = {
  "tools/list": "tools",
  "resources/list": "resources",
  "resources/templates/list": "resourceTemplates",
  "prompts/list": "prompts",
};

/** The result field a listing method answers with, or `undefined` for any other method. */
export function listingKindOf(method: string | undefined): ListingKind | undefined {
  return method === undefined || !Object.hasOwn(LISTINGS, method) ? undefined : LISTINGS[method];
}

/** May the token call this listed item? */
export type ListingAllows = (kind: ListingKind, item: Record<string, unknown>) => boolean;

/** Largest JSON response or SSE event the filter holds while rewriting it: 64 MiB. */
const MAX_HELD = 64 * 1024 * 1024;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Filters the listing results in `message` (one JSON-RPC response or a batch); true when changed. */
function filterMessage(
  message: unknown,
  listings: ReadonlyMap<string, ListingKind>,
  allows: ListingAllows,
): boolean {
  if (Array.isArray(message)) {
    let changed = false;
    for (const m of message) changed = filterMessage(m, listings, allows) || changed;
    return changed;
  }
  if (!isRecord(message) || !Object.hasOwn(message, "id") || !isRecord(message.result)) return false;
  const kind = listings.get(JSON.stringify(message.id));
  if (kind === undefined) return false;
  const items = message.result[kind];
  if (!Array.isArray(items)) return false;
  message.result[kind] = items.filter((item) => isRecord(item) && allows(kind, item));
  return true;
}

function withoutLength(headers: Headers): Headers {
  const out = new Headers(headers);
  out.delete("content-length");
  return out;
}

async function filterJson(
  response: Response,
  listings: ReadonlyMap<string, ListingKind>,
  allows: ListingAllows,
): Promise<Response> {
  const text = await boundedText(response, MAX_HELD, "MCP listing response");
  let message: unknown;
  try {
    message = JSON.parse(text);
  } catch {
    return new Response(text, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  }
  const changed = filterMessage(message, listings, allows);
  const body = changed ? JSON.stringify(message) : text;
  return new Response(body, {
    status: response.status,
    statusText: response.statusText,
    headers: withoutLength(response.headers),
  });
}

/**
 * An SSE stream (HTML Living Standard §9.2.6) rewritten event by event: an event's `data` lines
 * that hold a listing response are replaced by one `data` line of the filtered JSON; other fields
 * (`id`, `event`, `retry`, comments) and every other event pass unchanged.
 */
function filterSse(
  response: Response,
  listings: ReadonlyMap<string, ListingKind>,
  allows: ListingAllows,
): Response {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  let event: string[] = [];
  let held = 0;
  const flushEvent = (controller: TransformStreamDefaultController<Uint8Array>, terminator: string) => {
    const data = event
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(l.startsWith("data: ") ? 6 : 5));
    let lines = event;
    if (data.length) {
      try {
        const message: unknown = JSON.parse(data.join("\n"));
        if (filterMessage(message, listings, allows)) {
          const firstData = event.findIndex((l) => l.startsWith("data:"));
          lines = [
            ...event.slice(0, firstData).filter((l) => !l.startsWith("data:")),
            `data: ${JSON.stringify(message)}`,
            ...event.slice(firstData).filter((l) => !l.startsWith("data:")),
          ];
        }
      } catch {
        // Not JSON: not a listing response, passed as it came.
      }
    }
    controller.enqueue(encoder.encode(lines.map((l) => `${l}${terminator}`).join("") + terminator));
    event = [];
    held = 0;
  };
  const transform = new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      pending += decoder.decode(chunk, { stream: true });
      for (;;) {
        const match = /\r\n|\r|\n/.exec(pending);
        // A lone \r at the end may be the first half of \r\n: wait for the next chunk.
        if (match === null || (match[0] === "\r" && match.index === pending.length - 1)) break;
        const line = pending.slice(0, match.index);
        pending = pending.slice(match.index + match[0].length);
        if (line === "") flushEvent(controller, match[0]);
        else {
          held += line.length;
          if (held > MAX_HELD) throw new RangeError("SSE event exceeds the listing filter's limit");
          event.push(line);
        }
      }
      if (pending.length > MAX_HELD) throw new RangeError("SSE line exceeds the listing filter's limit");
    },
    flush(controller) {
      pending += decoder.decode();
      if (pending !== "") event.push(pending);
      // An unterminated last event is passed as it came (an SSE client would drop it anyway).
      if (event.length) controller.enqueue(encoder.encode(event.join("\n")));
    },
  });
  return new Response(response.body!.pipeThrough(transform), {
    status: response.status,
    statusText: response.statusText,
    headers: withoutLength(response.headers),
  });
}

/**
 * The server's response with the results of the listing requests (`listings`, by JSON-RPC id as
 * JSON text) filtered through `allows`. Other responses are returned as they are.
 */
export async function filterListingResponse(
  response: Response,
  listings: ReadonlyMap<string, ListingKind>,
  allows: ListingAllows,
): Promise<Response> {
  if (response.body === null || listings.size === 0) return response;
  const type = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "application/json") return filterJson(response, listings, allows);
  if (type === "text/event-stream") return filterSse(response, listings, allows);
  return response;
}
