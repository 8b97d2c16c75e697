/**
 * One audit event per decision of the operation gate, shaped as the authorization server's audit
 * events are (one typed value, snake_case fields, `at` in ms; the same value goes to the JSON log
 * and to the application's hook), plus an OpenTelemetry span with the same facts
 * (DESIGN.md "Observability": `@opentelemetry/api` only, a no-op until an SDK is installed).
 *
 * Identifiers only: never a token, never an argument value; a tool, prompt or resource name is
 * what the client sent, cut to {@link MAX_NAME} characters (the JSON log escapes control
 * characters, so an odd name cannot forge a line).
 */
import { type Attributes, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Logger } from "../../shared/log.js";
import { INSTRUMENTATION_SCOPE, telemetryInstalled } from "../../shared/telemetry.js";
import type { JsonRpcId, McpMessage } from "./messages.js";

const MAX_NAME = 256;

/** What the gate decided about one message (or, for a GET/DELETE, about the request). */
export type OperationDecisionName =
  /** Passed on to the server. */
  | "allowed"
  /** 403 `insufficient_scope`: the token lacks scopes the operation (or the batch) needs. */
  | "insufficient_scope"
  /** 403: the policy refuses it whatever the scopes (a `"deny"` rule, the default, unmet conditions). */
  | "denied"
  /** 401/400: no valid token (the challenge says which); nothing about the caller is known. */
  | "unauthenticated"
  /** 400/413: the body is not valid JSON-RPC, or too large. */
  | "malformed"
  /** Allowed itself, but refused with the rest of its batch (a batch is judged as a whole). */
  | "refused_with_batch";

/** The audit event of one decision. */
export interface OperationAuditEvent {
  type: "mcp_operation";
  /** Server clock, ms since the epoch. */
  at: number;
  decision: OperationDecisionName;
  /** The HTTP method (a GET opens the server's stream, a DELETE ends a session). */
  http_method: string;
  /** The JSON-RPC method, for a POST. */
  method?: string;
  /** The JSON-RPC id of a request (absent for a notification): the request's identifier. */
  request_id?: JsonRpcId;
  /** `tool`, `resource` or `prompt`, and its name (tool/prompt name, resource URI). */
  target_kind?: "tool" | "resource" | "prompt";
  target?: string;
  /** `sub` and `client_id` of the verified token, when there was one. */
  sub?: string;
  client_id?: string;
  /** The scopes the operation needs, and those the token lacks (`insufficient_scope`). */
  required_scopes?: string[];
  missing_scopes?: string[];
  /** Why a `denied` operation was denied. */
  reason?: "policy" | "unmatched" | "scope-template" | "conditions";
  /** HTTP status the gate answered (200 = passed on). */
  status: number;
  /** Time the gate spent deciding (body read, token, policy), in ms. */
  latency_ms: number;
}

/** Where the events go: the logger (`mcp.operation`, info; refusals warn) and the hook. */
export interface OperationAuditSinks {
  logger?: Logger;
  onAuditEvent?: (event: OperationAuditEvent) => void;
}

function cut(name: string): string {
  return name.length > MAX_NAME ? `${name.slice(0, MAX_NAME)}…` : name;
}

/** The event's fields for one message (method, id, target). */
export function messageFields(message: McpMessage): Partial<OperationAuditEvent> {
  const fields: Partial<OperationAuditEvent> = {};
  if (message.method !== undefined) fields.method = cut(message.method);
  if (message.id !== undefined)
    fields.request_id = typeof message.id === "string" ? cut(message.id) : message.id;
  if (message.target !== undefined) {
    fields.target_kind = message.target.kind;
    fields.target = cut(message.target.name);
  }
  return fields;
}

/** OpenTelemetry attributes of an event (MCP semantic conventions where they exist). */
function attributesOf(event: OperationAuditEvent): Attributes {
  const attributes: Attributes = {
    "gatehouse.mcp.decision": event.decision,
    "http.request.method": event.http_method,
    "http.response.status_code": event.status,
  };
  if (event.method !== undefined) attributes["mcp.method.name"] = event.method;
  if (event.request_id !== undefined && event.request_id !== null)
    attributes["jsonrpc.request.id"] = String(event.request_id);
  if (event.target_kind === "tool") attributes["gen_ai.tool.name"] = event.target!;
  if (event.target_kind === "prompt") attributes["gen_ai.prompt.name"] = event.target!;
  if (event.target_kind === "resource") attributes["mcp.resource.uri"] = event.target!;
  if (event.sub !== undefined) attributes["enduser.id"] = event.sub;
  if (event.client_id !== undefined) attributes["oauth.client_id"] = event.client_id;
  if (event.required_scopes?.length) attributes["gatehouse.mcp.required_scopes"] = event.required_scopes;
  if (event.missing_scopes?.length) attributes["gatehouse.mcp.missing_scopes"] = event.missing_scopes;
  if (event.reason !== undefined) attributes["gatehouse.mcp.denied_reason"] = event.reason;
  return attributes;
}

/**
 * Emits the events of one decision: each to the logger and the hook, and each as a span
 * `mcp.authorize <method>` ending now, started `latency_ms` ago. A throwing hook is logged by error
 * name only and never changes the answer.
 */
export function emitOperationEvents(
  sinks: OperationAuditSinks,
  events: readonly OperationAuditEvent[],
): void {
  const traced = telemetryInstalled();
  for (const event of events) {
    const refused = event.decision !== "allowed";
    if (sinks.logger) {
      const { type: _type, at: _at, ...fields } = event;
      (refused ? sinks.logger.warn : sinks.logger.info).call(sinks.logger, "mcp.operation", fields);
    }
    if (sinks.onAuditEvent) {
      try {
        sinks.onAuditEvent(event);
      } catch (error) {
        sinks.logger?.warn("mcp.audit_hook_failed", {
          error: error instanceof Error ? error.name : typeof error,
        });
      }
    }
    if (traced) {
      const span = trace
        .getTracer(INSTRUMENTATION_SCOPE)
        .startSpan(`mcp.authorize ${event.method ?? event.http_method}`, {
          kind: SpanKind.INTERNAL,
          startTime: event.at - event.latency_ms,
          attributes: attributesOf(event),
        });
      if (refused) span.setStatus({ code: SpanStatusCode.ERROR, message: event.decision });
      span.end(event.at);
    }
  }
}
