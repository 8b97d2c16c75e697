/**
 * The JSON-RPC body of an MCP Streamable HTTP POST, read once: parsed, checked as JSON-RPC 2.0
 * (one message or a batch), and each message named as the operation the policy judges.
 *
 * Malformed input gets what the MCP transport spec (Streamable HTTP, "Sending messages to the
 * server") and JSON-RPC 2.0 §5.1 say: HTTP 400 with a JSON-RPC error response without an `id`
 * (`-32700` parse error, `-32600` invalid request, `-32602` invalid params), 413 for a body over
 * the cap.
 */

export type JsonRpcId = string | number | null;

/** What the policy is asked about: a tool, a resource (by URI) or a prompt. */
export interface OperationTarget {
  readonly kind: "tool" | "resource" | "prompt";
  readonly name: string;
}

/** One message of the body, as the policy sees it. Never carries argument values. */
export interface McpMessage {
  /** A request has an `id`; a notification has none; a response answers the server. */
  readonly kind: "request" | "notification" | "response";
  readonly method: string | undefined;
  readonly id: JsonRpcId | undefined;
  readonly target: OperationTarget | undefined;
}

/** A body that is not valid JSON-RPC: the HTTP status and the JSON-RPC error to answer with. */
export interface MalformedBody {
  readonly status: 400 | 413;
  readonly code: -32700 | -32600 | -32602;
  readonly message: string;
  readonly id: JsonRpcId;
}

export type ParsedBody =
  | {
      readonly ok: true;
      readonly body: unknown;
      readonly batch: boolean;
      readonly messages: readonly McpMessage[];
    }
  | { readonly ok: false; readonly malformed: MalformedBody };

/** The MCP methods whose target the policy names, and the parameter holding it. */
const TARGETED: Readonly<Record<string, { kind: OperationTarget["kind"]; param: "name" | "uri" }>> = {
  "tools/call": { kind: "tool", param: "name" },
  "prompts/get": { kind: "prompt", param: "name" },
  "resources/read": { kind: "resource", param: "uri" },
  "resources/subscribe": { kind: "resource", param: "uri" },
  "resources/unsubscribe": { kind: "resource", param: "uri" },
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isId(value: unknown): value is JsonRpcId {
  return typeof value === "string" || typeof value === "number" || value === null;
}

function malformed(
  status: 400 | 413,
  code: MalformedBody["code"],
  message: string,
  id: JsonRpcId = null,
): ParsedBody {
  return { ok: false, malformed: { status, code, message, id } };
}

/** A body over the cap (413; the JSON-RPC code is `-32600`, the request is refused as a whole). */
export function tooLarge(): MalformedBody {
  return { status: 413, code: -32600, message: "Request body too large", id: null };
}

/** One message checked (JSON-RPC 2.0 §4, §5) and named; a string is the reason it is invalid. */
function readMessage(value: unknown): McpMessage | { invalid: MalformedBody } {
  const invalid = (code: MalformedBody["code"], message: string, id: JsonRpcId = null) => ({
    invalid: { status: 400 as const, code, message, id },
  });
  if (!isRecord(value) || value.jsonrpc !== "2.0") return invalid(-32600, "Invalid Request");
  const hasId = Object.hasOwn(value, "id");
  if (hasId && !isId(value.id)) return invalid(-32600, "Invalid Request");
  const id = hasId ? (value.id as JsonRpcId) : undefined;
  if (!Object.hasOwn(value, "method")) {
    // A response to a request the server sent (sampling, elicitation, roots): no method, an id.
    if (hasId && (Object.hasOwn(value, "result") || Object.hasOwn(value, "error"))) {
      return { kind: "response", method: undefined, id, target: undefined };
    }
    return invalid(-32600, "Invalid Request", id ?? null);
  }
  if (typeof value.method !== "string") return invalid(-32600, "Invalid Request", id ?? null);
  const method = value.method;
  // JSON-RPC 2.0 §4.2: params, when present, is an object or an array.
  if (Object.hasOwn(value, "params") && typeof value.params !== "object") {
    return invalid(-32600, "Invalid Request", id ?? null);
  }
  // A notification (no id) is judged like a request of the same method: a server may act on it.
  const kind = hasId ? "request" : "notification";
  const targeted = TARGETED[method];
  if (targeted === undefined) return { kind, method, id, target: undefined };
  const params = value.params;
  const name = isRecord(params) ? params[targeted.param] : undefined;
  // Without its target the operation cannot be judged: refused, never guessed (JSON-RPC -32602).
  if (typeof name !== "string") {
    return invalid(-32602, `Invalid params: ${method} needs a string ${targeted.param}`, id ?? null);
  }
  return { kind, method, id, target: { kind: targeted.kind, name } };
}

/**
 * Parses a POST body: one JSON-RPC message or a non-empty batch of them. Every message must be
 * valid for the body to pass (a batch is judged, and refused, as a whole).
 */
export function parseJsonRpcBody(text: string): ParsedBody {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return malformed(400, -32700, "Parse error");
  }
  return parseJsonRpcValue(body);
}

/** {@link parseJsonRpcBody} for a body a framework has already parsed as JSON (`express.json()`). */
export function parseJsonRpcValue(body: unknown): ParsedBody {
  const batch = Array.isArray(body);
  const items: unknown[] = batch ? (body as unknown[]) : [body];
  if (items.length === 0) return malformed(400, -32600, "Invalid Request");
  const messages: McpMessage[] = [];
  for (const item of items) {
    const message = readMessage(item);
    if ("invalid" in message)
      return { ok: false, malformed: batch ? { ...message.invalid, id: null } : message.invalid };
    messages.push(message);
  }
  return { ok: true, body, batch, messages };
}

/** The JSON-RPC error response for a malformed body (`id` null unless one request named it). */
export function malformedResponseBody(error: MalformedBody): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id: error.id,
    error: { code: error.code, message: error.message },
  });
}
