/**
 * The gateway: an existing Streamable HTTP MCP server, protected without touching its code. In
 * front of it the gateway serves the protected resource metadata (RFC 9728), the challenges and
 * the operation policy (resource-server/operations/gate.ts), and passes what the policy allows
 * through, streaming both ways (an SSE answer is relayed as it comes).
 *
 * What never reaches the upstream: the client's token or DPoP proof (MCP spec, Security "Token
 * passthrough": a server MUST NOT pass the token it received on), cookies, and any header the
 * client sent under the names the operator uses to tell the upstream who called. Request headers
 * are passed by an allow-list (the MCP transport's own: `Accept`, `Content-Type`, `Mcp-Session-Id`,
 * `MCP-Protocol-Version`, `Last-Event-ID`, `Mcp-Method`, `Mcp-Name`), the body as the gate parsed
 * and judged it (re-serialised, so the upstream cannot read another message out of the same bytes).
 *
 * Sessions: the upstream's `Mcp-Session-Id` is handed to the client bound to the caller (an HMAC of
 * the subject and the id, under a key of the gateway's), and a request presenting a session of
 * another subject gets 404, as an unknown session does (MCP transport spec, Session management).
 * Stateless, so gateways sharing the key can stand side by side.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { headOfRequest } from "../resource-server/bearer-token.js";
import { challengePartsResponse } from "../resource-server/challenge.js";
import {
  type OperationContext,
  type OperationGate,
  readBoundedText,
} from "../resource-server/operations/gate.js";
import type { ResourceServer } from "../resource-server/resource-server.js";
import { completeResponse } from "../shared/http.js";
import type { Logger } from "../shared/log.js";
import type { IdentityAssertionSigner } from "./identity-assertion.js";
import type { StdioUpstream } from "./stdio-upstream.js";

/** Headers the gateway sets for the upstream from the verified token (names are the operator's). */
export interface IdentityHeaders {
  /** The token's `sub`. */
  subject?: string;
  /** The token's `client_id`. */
  clientId?: string;
  /** The token's scopes, space-separated. */
  scopes?: string;
}

export interface HttpGatewayOptions {
  /** The upstream MCP endpoint (Streamable HTTP), e.g. `http://127.0.0.1:3000/mcp`; or `stdio`. */
  upstream?: string;
  /** A stdio MCP server instead of `upstream` (stdio-upstream.ts): a child process per session. */
  stdio?: StdioUpstream;
  resourceServer: Pick<ResourceServer, "resource" | "handles" | "metadataResponse">;
  gate: OperationGate;
  identityHeaders?: IdentityHeaders;
  /**
   * A signed identity assertion (identity-assertion.ts) in header `header`, for an upstream that
   * checks who called by signature rather than by trusting a private link.
   */
  identityAssertion?: { header: string; signer: IdentityAssertionSigner };
  /** Key binding session ids to callers (32 bytes or more; default: random per process). */
  sessionKey?: Uint8Array;
  /** Time to wait for the upstream's response headers, in ms (default 30 000). */
  upstreamTimeoutMs?: number;
  logger?: Logger;
}

export interface HttpGateway {
  fetch(request: Request): Promise<Response>;
  /** Requests waiting for the upstream's answer. */
  readonly inFlight: number;
}

/** Request headers passed to the upstream (MCP transport spec, Streamable HTTP). */
const PASSED_REQUEST_HEADERS = ["accept", "content-type", "mcp-protocol-version", "last-event-id"];
/**
 * Set from the judged body, never copied from the client (2026-07-28, SEP-2243: a server may route
 * by them; a client's own could name another operation than the body the gate judged).
 */
const OPERATION_HEADERS = ["mcp-method", "mcp-name"];
/** Response headers never relayed: hop-by-hop (RFC 9110 §7.6.1), and those fetch has undone. */
const DROPPED_RESPONSE_HEADERS = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  // The listener frames the answer itself (a JSON answer is re-sent as text, a stream chunked).
  "content-length",
  "set-cookie",
]);
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const SESSION_MAC_CHARS = 22;

function jsonRpcError(status: number, message: string, id: unknown = null): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message } }), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

/** The id of a single request (for an error answer in its name), else `null`. */
function singleId(context: OperationContext): unknown {
  const only = context.messages.length === 1 ? context.messages[0] : undefined;
  return only?.kind === "request" ? only.id : null;
}

/** Header values the verified token yields; a value a header cannot carry is left out. */
function identityValue(value: string | undefined): string | undefined {
  return value !== undefined && /^[\x20-\x7e]*$/.test(value) ? value : undefined;
}

/** Statuses whose answers have no body (RFC 9110 §15.3.5, §15.4.5). */
const NULL_BODY = new Set([204, 205, 304]);
/** Largest JSON answer the relay reads whole: 64 MiB. */
const MAX_JSON_ANSWER = 64 * 1024 * 1024;

function readAll(message: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    message.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        message.destroy();
        reject(new RangeError("answer too large"));
        return;
      }
      chunks.push(chunk);
    });
    message.once("end", () => resolve(Buffer.concat(chunks, size).toString("utf8")));
    message.once("error", reject);
    message.once("aborted", () => reject(new Error("answer cut")));
  });
}

export function createHttpGateway(options: HttpGatewayOptions): HttpGateway {
  if ((options.upstream === undefined) === (options.stdio === undefined)) {
    throw new TypeError("give exactly one of upstream and stdio");
  }
  const upstream = new URL(options.upstream ?? "http://stdio.invalid/");
  if (upstream.protocol !== "http:" && upstream.protocol !== "https:") {
    throw new TypeError("upstream must be an http or https URL");
  }
  const stdio = options.stdio;
  // node:http with a keep-alive pool: fetch (undici) costs more per request than the rest of the
  // relay, and the answer is relayed as it arrives either way.
  const agent =
    upstream.protocol === "https:"
      ? new HttpsAgent({ keepAlive: true, maxSockets: 256 })
      : new HttpAgent({ keepAlive: true, maxSockets: 256 });
  const send = upstream.protocol === "https:" ? httpsRequest : httpRequest;
  const exchange = (
    method: string,
    headers: Headers,
    body: string | undefined,
    signal: AbortSignal,
  ): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      const fields: Record<string, string> = {};
      headers.forEach((value, name) => {
        fields[name] = value;
      });
      if (body !== undefined) fields["content-length"] = String(Buffer.byteLength(body));
      const outgoing = send(upstream, { method, headers: fields, agent, signal }, resolve);
      outgoing.once("error", reject);
      outgoing.end(body);
    });
  const identity = options.identityHeaders ?? {};
  for (const name of Object.values(identity)) {
    if (name !== undefined && !HEADER_NAME.test(name))
      throw new TypeError(`invalid identity header name ${name}`);
  }
  const assertionHeader = options.identityAssertion?.header;
  if (assertionHeader !== undefined && !HEADER_NAME.test(assertionHeader))
    throw new TypeError(`invalid identity assertion header name ${assertionHeader}`);
  if (assertionHeader !== undefined && options.stdio !== undefined)
    throw new TypeError("an identity assertion is for an HTTP upstream");
  const identityNames = new Set(
    [...Object.values(identity), assertionHeader]
      .filter((n): n is string => n !== undefined)
      .map((n) => n.toLowerCase()),
  );
  for (const name of identityNames) {
    if (
      PASSED_REQUEST_HEADERS.includes(name) ||
      OPERATION_HEADERS.includes(name) ||
      name === "mcp-session-id" ||
      name === "authorization" ||
      name === "host" ||
      name === "content-length"
    ) {
      throw new TypeError(`identity header ${name} would replace a header of the MCP transport`);
    }
  }
  const sessionKey = options.sessionKey ?? randomBytes(32);
  if (sessionKey.length < 32) throw new TypeError("sessionKey must be at least 32 bytes");
  const timeoutMs = options.upstreamTimeoutMs ?? 30_000;
  const resourcePath = new URL(options.resourceServer.resource).pathname;
  let inFlight = 0;

  const mac = (subject: string, session: string) =>
    createHmac("sha256", sessionKey)
      .update(`${subject}\0${session}`)
      .digest("base64url")
      .slice(0, SESSION_MAC_CHARS);
  const caller = (context: OperationContext) =>
    `${context.auth.subject ?? ""}\0${context.auth.clientId ?? ""}`;
  /** The upstream's session id inside the client's, when the client's was issued to this caller. */
  const openSession = (presented: string, context: OperationContext): string | undefined => {
    const dot = presented.lastIndexOf(".");
    if (dot <= 0) return undefined;
    const session = presented.slice(0, dot);
    const expected = Buffer.from(mac(caller(context), session));
    const given = Buffer.from(presented.slice(dot + 1));
    return given.length === expected.length && timingSafeEqual(given, expected) ? session : undefined;
  };

  const relay = async (request: Request, context: OperationContext): Promise<Response> => {
    const headers = new Headers();
    for (const name of PASSED_REQUEST_HEADERS) {
      const value = request.headers.get(name);
      if (value !== null) headers.set(name, value);
    }
    // The operation headers say what the gate judged: one message's method and target, else none.
    const only = context.messages.length === 1 ? context.messages[0] : undefined;
    // A method or name a header cannot carry as it is (not printable ASCII) is left out.
    if (only?.method !== undefined && request.headers.has("mcp-method") && /^[\x20-\x7e]*$/.test(only.method))
      headers.set("mcp-method", only.method);
    if (
      only?.target !== undefined &&
      request.headers.has("mcp-name") &&
      /^[\x20-\x7e]*$/.test(only.target.name)
    ) {
      headers.set("mcp-name", only.target.name);
    }
    const presented = request.headers.get("mcp-session-id");
    if (presented !== null) {
      const session = openSession(presented, context);
      // MCP transport spec: an unknown session is 404 (the client starts a new one); a session
      // issued to another caller is unknown to this one.
      if (session === undefined) return jsonRpcError(404, "Session not found", singleId(context));
      headers.set("mcp-session-id", session);
    }
    const put = (name: string | undefined, value: string | undefined) => {
      if (name !== undefined && value !== undefined) headers.set(name, value);
    };
    put(identity.subject, identityValue(context.auth.subject));
    put(identity.clientId, identityValue(context.auth.clientId));
    put(identity.scopes, identityValue(context.auth.scopes.join(" ")));
    // Set by the gateway alone: a client's own header of that name is never among those passed.
    if (options.identityAssertion) {
      headers.set(
        options.identityAssertion.header,
        await options.identityAssertion.signer.assertion(context.auth),
      );
    }

    const abort = new AbortController();
    const onClientGone = () => abort.abort();
    request.signal.addEventListener("abort", onClientGone, { once: true });
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    inFlight++;
    let settled = false;
    // The client-gone listener stays: a client leaving mid-stream aborts the upstream's stream too.
    const done = () => {
      if (settled) return;
      settled = true;
      inFlight--;
    };
    let answer: IncomingMessage;
    try {
      answer = await exchange(
        request.method,
        headers,
        context.body === undefined || request.method !== "POST" ? undefined : JSON.stringify(context.body),
        abort.signal,
      );
    } catch (error) {
      done();
      options.logger?.warn("gateway.upstream_failed", {
        reason: abort.signal.aborted
          ? "timeout_or_client_gone"
          : error instanceof Error
            ? ((error as NodeJS.ErrnoException).code ?? error.name)
            : "error",
      });
      return jsonRpcError(502, "The MCP server behind the gateway did not answer", singleId(context));
    } finally {
      clearTimeout(timer);
    }
    const out = new Headers();
    const raw = answer.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      const name = raw[i]!.toLowerCase();
      if (!DROPPED_RESPONSE_HEADERS.has(name)) out.append(name, raw[i + 1]!);
    }
    const session = answer.headers["mcp-session-id"];
    if (typeof session === "string") out.set("mcp-session-id", `${session}.${mac(caller(context), session)}`);
    out.set("access-control-expose-headers", "Mcp-Session-Id, WWW-Authenticate");
    const status = answer.statusCode ?? 502;
    const type = answer.headers["content-type"] ?? "";
    if (NULL_BODY.has(status) || request.method === "HEAD") {
      answer.resume();
      done();
      return new Response(null, { status, headers: out });
    }
    if (/^application\/json/i.test(type) && answer.headers["content-encoding"] === undefined) {
      // A JSON answer is read whole (bounded) and handed to the listener as text, one write.
      try {
        const text = await readAll(answer, MAX_JSON_ANSWER);
        return completeResponse(text, { status, headers: out });
      } catch {
        return jsonRpcError(
          502,
          "The MCP server behind the gateway sent an answer too large or cut",
          singleId(context),
        );
      } finally {
        done();
      }
    }
    // Anything else (an SSE stream above all) streams through as the upstream sends it.
    done();
    return new Response(Readable.toWeb(answer) as ReadableStream<Uint8Array>, { status, headers: out });
  };

  return {
    get inFlight() {
      return inFlight;
    },
    async fetch(request) {
      const started = performance.now();
      const url = new URL(request.url);
      if (options.resourceServer.handles(request)) return options.resourceServer.metadataResponse(request);
      if (url.pathname === "/health" && resourcePath !== "/health") {
        // Liveness for load balancers: no token, nothing about the upstream or the callers.
        return new Response(JSON.stringify({ status: "ok", in_flight: inFlight }), {
          headers: { "content-type": "application/json", "cache-control": "no-store" },
        });
      }
      if (url.pathname !== resourcePath) return new Response("Not Found\n", { status: 404 });
      if (request.method === "OPTIONS") {
        // CORS preflight: no token to judge (browsers send none); the real request is judged.
        return new Response(null, {
          status: 204,
          headers: {
            "access-control-allow-origin": "*",
            "access-control-allow-methods": "GET, POST, DELETE",
            "access-control-allow-headers":
              "authorization, dpop, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, mcp-method, mcp-name",
            "access-control-expose-headers": "Mcp-Session-Id, WWW-Authenticate",
            "access-control-max-age": "600",
          },
        });
      }
      if (request.method !== "GET" && request.method !== "POST" && request.method !== "DELETE") {
        return new Response("Method Not Allowed\n", {
          status: 405,
          headers: { allow: "GET, POST, DELETE, OPTIONS" },
        });
      }
      // The gate's judgement on the body read once; the relay sends the parsed body, so the request
      // is not rebuilt around the bytes (gate.handle would, for servers that read them).
      const head = headOfRequest(request);
      const body =
        request.method === "POST" ? await readBoundedText(request, options.gate.readLimit(head)) : undefined;
      const verdict = await options.gate.judge(head, body, started);
      if (!verdict.ok) return challengePartsResponse(verdict.answer);
      const answer = stdio
        ? await stdio.relay(request, verdict, request.headers.get("mcp-session-id") ?? undefined)
        : await relay(request, verdict);
      return options.gate.filterResponse(answer, verdict);
    },
  };
}
