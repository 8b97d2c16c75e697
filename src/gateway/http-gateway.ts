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
 *
 * Two ways in, the same judgement and relay: `fetch` (a web `Request`, any adapter) and
 * `nodeListener` (node:http), which relays a request to the resource path without building a web
 * `Request`, `Response`, `Headers` or stream: it reads the head and the body from `IncomingMessage`
 * and writes the upstream's answer to `ServerResponse` (a JSON answer in one write, an SSE stream
 * piped as it comes). Everything else (metadata, `/health`, CORS preflight, the listing filter's
 * rewrite, a stdio upstream) goes the web way there too.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import {
  type ClientRequest,
  Agent as HttpAgent,
  request as httpRequest,
  type IncomingMessage,
  type RequestOptions,
  type ServerResponse,
} from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { urlToHttpOptions } from "node:url";
import { logHandlerError, proxyHops, toNodeListener } from "../http/node-listener.js";
import { NodeRequestHead, originResolver, writeChallenge } from "../http/node-require-bearer.js";
import { plainResponse, sendWebResponse } from "../http/node-response.js";
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
import {
  type AnswerHead,
  answerHeadOf,
  BAD_ANSWER,
  BAD_UPSTREAM,
  type ClientWatch,
  EXPOSED,
  HEADER_NAME,
  IDLE_UPSTREAM_CONNECTION_MS,
  identityValue,
  jsonRpcError,
  MAX_JSON_ANSWER,
  NULL_BODY,
  OPERATION_HEADERS,
  PASSED_REQUEST_HEADERS,
  PRINTABLE,
  pathOf,
  readAll,
  readNodeBody,
  relayFieldsOf,
  SESSION_MAC_CHARS,
  singleId,
  UpstreamFailure,
  WATCH_CLIENT_AFTER_MS,
  watchResponse,
  watchSignal,
  wholeAnswer,
  writeJsonRpcError,
} from "./relay-parts.js";
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

/** Options of {@link HttpGateway.nodeListener}, as `toNodeListener`'s. */
export interface GatewayNodeListenerOptions {
  /** Trusted proxy hops in front of the gateway (`true` = 1), as for `toNodeListener`. */
  trustProxy?: boolean | number;
  /**
   * Largest request body read, in bytes (default: the gate's `maxBodyBytes`, whichever is smaller
   * applies). Beyond, the gate's 413 JSON-RPC error once the token is judged.
   */
  maxBodyBytes?: number;
  /** Called with an error that ends a request early (default: one JSON line, the error's class). */
  onError?: (error: unknown) => void;
}

export interface HttpGateway {
  fetch(request: Request): Promise<Response>;
  /**
   * The gateway as a node:http request listener: the same answers as `toNodeListener(fetch)`, with
   * the relay of a request to the resource path done on node's own objects (no web `Request` or
   * `Response` built for it).
   */
  nodeListener(options?: GatewayNodeListenerOptions): (req: IncomingMessage, res: ServerResponse) => void;
  /** Requests waiting for the upstream's answer. */
  readonly inFlight: number;
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
  // relay, and the answer is relayed as it arrives either way. An idle pooled connection is closed
  // by the gateway first (node's agent also heeds a shorter `Keep-Alive: timeout=` hint, but only
  // when it has a timeout of its own): reusing one the upstream is closing at that moment fails the
  // request with ECONNRESET, a 502 for a call the upstream never saw.
  const pool = { keepAlive: true, maxSockets: 256, timeout: IDLE_UPSTREAM_CONNECTION_MS };
  const agent = upstream.protocol === "https:" ? new HttpsAgent(pool) : new HttpAgent(pool);
  const send = upstream.protocol === "https:" ? httpsRequest : httpRequest;
  // The upstream's address as request options, made once rather than from the URL per request.
  const { protocol, hostname, port, path } = urlToHttpOptions(upstream);
  const target: RequestOptions = { protocol, hostname, port, path, agent };
  // The request's fields go to node as one list (no per-field setHeader), so Host is ours to set.
  const hostField = upstream.host;
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

  /**
   * The request's fields for the upstream (flat name/value list), from the client's by the
   * allow-list and from the verdict; undefined when the client presented a session that is not its
   * own (MCP transport spec: an unknown session is 404, the client starts a new one).
   */
  const upstreamFields = async (
    get: (name: string) => string | null,
    context: OperationContext,
  ): Promise<string[] | undefined> => {
    const fields = ["host", hostField];
    for (const name of PASSED_REQUEST_HEADERS) {
      const value = get(name);
      if (value !== null) fields.push(name, value);
    }
    // The operation headers say what the gate judged: one message's method and target, else none;
    // a value a header cannot carry as it is (not printable ASCII) is left out.
    const only = context.messages.length === 1 ? context.messages[0] : undefined;
    if (only?.method !== undefined && get("mcp-method") !== null && PRINTABLE.test(only.method))
      fields.push("mcp-method", only.method);
    if (only?.target !== undefined && get("mcp-name") !== null && PRINTABLE.test(only.target.name))
      fields.push("mcp-name", only.target.name);
    const presented = get("mcp-session-id");
    if (presented !== null) {
      const session = openSession(presented, context);
      // A session issued to another caller is unknown to this one.
      if (session === undefined) return undefined;
      fields.push("mcp-session-id", session);
    }
    const put = (name: string | undefined, value: string | undefined) => {
      if (name !== undefined && value !== undefined) fields.push(name.toLowerCase(), value);
    };
    put(identity.subject, identityValue(context.auth.subject));
    put(identity.clientId, identityValue(context.auth.clientId));
    put(identity.scopes, identityValue(context.auth.scopes.join(" ")));
    // Set by the gateway alone: a client's own header of that name is never among those passed.
    if (options.identityAssertion) {
      fields.push(
        options.identityAssertion.header,
        await options.identityAssertion.signer.assertion(context.auth),
      );
    }
    return fields;
  };

  /**
   * One request to the upstream, answered with its response once the headers are in. Bounded by
   * `timeoutMs` for the headers; a client gone meanwhile cuts it too (watched from
   * {@link WATCH_CLIENT_AFTER_MS} on: most answers come sooner, and watching a web request's signal
   * costs an `AbortController`). Once the answer streams, a client leaving cancels it (the listener
   * cancels the body; the node path's pipeline destroys both ends).
   */
  const exchange = (
    method: string,
    fields: string[],
    body: string | undefined,
    watch: ClientWatch,
  ): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
      if (body !== undefined) fields.push("content-length", String(Buffer.byteLength(body)));
      let unwatch: (() => void) | undefined;
      let watching = false;
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        clearTimeout(timer);
        unwatch?.();
      };
      const outgoing: ClientRequest = send({ ...target, method, headers: fields }, (answer) => {
        settle();
        resolve(answer);
      });
      outgoing.on("error", (error) => {
        settle();
        reject(error);
      });
      const stop = (reason: string) => outgoing.destroy(new UpstreamFailure(reason));
      const first = Math.min(WATCH_CLIENT_AFTER_MS, timeoutMs);
      const phase = () => {
        if (!watching && first < timeoutMs) {
          watching = true;
          unwatch = watch(() => stop("client_gone"));
          timer = setTimeout(phase, timeoutMs - first);
        } else stop("timeout");
      };
      timer = setTimeout(phase, first);
      outgoing.end(body);
    });

  /** {@link exchange}, counted in flight; a failure is logged by reason and answered undefined. */
  const call = async (
    method: string,
    fields: string[],
    context: OperationContext,
    watch: ClientWatch,
  ): Promise<IncomingMessage | undefined> => {
    inFlight++;
    try {
      // The body as the gate parsed and judged it, re-serialised: the upstream cannot read another
      // message out of the same bytes (duplicate keys, a parser of its own).
      return await exchange(
        method,
        fields,
        context.body === undefined || method !== "POST" ? undefined : JSON.stringify(context.body),
        watch,
      );
    } catch (error) {
      inFlight--;
      options.logger?.warn("gateway.upstream_failed", {
        reason:
          error instanceof UpstreamFailure
            ? error.reason
            : error instanceof Error
              ? ((error as NodeJS.ErrnoException).code ?? error.name)
              : "error",
      });
      return undefined;
    }
  };

  /** The answer's head for the client: hop-by-hop fields dropped, the session bound to the caller. */
  const answerHead = (answer: IncomingMessage, context: OperationContext): AnswerHead => {
    const head = answerHeadOf(answer.rawHeaders);
    const session = head.session;
    if (session !== undefined)
      head.fields.push("mcp-session-id", `${session}.${mac(caller(context), session)}`);
    head.fields.push("access-control-expose-headers", EXPOSED);
    return head;
  };

  /** The upstream's answer as a web `Response` (counted out of flight when read or streaming). */
  const webAnswer = async (
    answer: IncomingMessage,
    head: AnswerHead,
    context: OperationContext,
  ): Promise<Response> => {
    const fields = head.fields;
    const headers = new Headers();
    for (let i = 0; i < fields.length; i += 2) headers.append(fields[i]!, fields[i + 1]!);
    const status = answer.statusCode ?? 502;
    if (NULL_BODY.has(status)) {
      answer.resume();
      inFlight--;
      return new Response(null, { status, headers });
    }
    if (wholeAnswer(head)) {
      // A JSON answer is read whole (bounded) and handed to the listener as text, one write.
      try {
        const text = (await readAll(answer, MAX_JSON_ANSWER)).toString("utf8");
        return completeResponse(text, { status, headers });
      } catch {
        return jsonRpcError(502, BAD_ANSWER, singleId(context));
      } finally {
        inFlight--;
      }
    }
    // Anything else (an SSE stream above all) streams through as the upstream sends it.
    inFlight--;
    return new Response(Readable.toWeb(answer) as ReadableStream<Uint8Array>, { status, headers });
  };

  const relay = async (request: Request, context: OperationContext): Promise<Response> => {
    const fields = await upstreamFields((name) => request.headers.get(name), context);
    if (fields === undefined) return jsonRpcError(404, "Session not found", singleId(context));
    const answer = await call(request.method, fields, context, watchSignal(request));
    if (answer === undefined) return jsonRpcError(502, BAD_UPSTREAM, singleId(context));
    return webAnswer(answer, answerHead(answer, context), context);
  };

  /** The node path's relay: the answer written to `res` as it came, no web objects in between. */
  const relayNode = async (req: IncomingMessage, res: ServerResponse, context: OperationContext) => {
    const fields = await upstreamFields(relayFieldsOf(req.rawHeaders), context);
    if (fields === undefined) return writeJsonRpcError(res, 404, "Session not found", singleId(context));
    const method = req.method ?? "GET";
    const answer = await call(method, fields, context, watchResponse(res));
    if (answer === undefined) return writeJsonRpcError(res, 502, BAD_UPSTREAM, singleId(context));
    const head = answerHead(answer, context);
    const out = head.fields;
    if (context.listings !== undefined) {
      // The listing filter rewrites the answer: through its web form, as the web path does.
      const filtered = await options.gate.filterResponse(await webAnswer(answer, head, context), context);
      await sendWebResponse(res, filtered);
      return;
    }
    const status = answer.statusCode ?? 502;
    if (NULL_BODY.has(status)) {
      answer.resume();
      inFlight--;
      res.writeHead(status, out);
      res.end();
      return;
    }
    if (wholeAnswer(head)) {
      let bytes: Buffer;
      try {
        bytes = await readAll(answer, MAX_JSON_ANSWER);
      } catch {
        return writeJsonRpcError(res, 502, BAD_ANSWER, singleId(context));
      } finally {
        inFlight--;
      }
      out.push("content-length", String(bytes.length));
      res.writeHead(status, out);
      res.end(bytes);
      return;
    }
    inFlight--;
    res.writeHead(status, out);
    res.flushHeaders();
    // Either end going away ends both: a client leaving mid-stream closes the upstream's stream.
    await pipeline(answer, res).catch(() => {});
  };

  const fetchHandler = async (request: Request): Promise<Response> => {
    const started = performance.now();
    if (options.resourceServer.handles(request)) return options.resourceServer.metadataResponse(request);
    const path = pathOf(request.url);
    if (path === "/health" && resourcePath !== "/health") {
      // Liveness for load balancers: no token, nothing about the upstream or the callers.
      return new Response(JSON.stringify({ status: "ok", in_flight: inFlight }), {
        headers: { "content-type": "application/json", "cache-control": "no-store" },
      });
    }
    if (path !== resourcePath) return new Response("Not Found\n", { status: 404 });
    if (request.method === "OPTIONS") {
      // CORS preflight: no token to judge (browsers send none); the real request is judged.
      return new Response(null, {
        status: 204,
        headers: {
          "access-control-allow-origin": "*",
          "access-control-allow-methods": "GET, POST, DELETE",
          "access-control-allow-headers":
            "authorization, dpop, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id, mcp-method, mcp-name",
          "access-control-expose-headers": EXPOSED,
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
  };

  /** Whether node's request target is the resource path exactly (origin-form, any query). */
  const isResourceTarget = (url = ""): boolean =>
    url.startsWith(resourcePath) &&
    (url.length === resourcePath.length || url.charCodeAt(resourcePath.length) === 63); // "?"

  return {
    get inFlight() {
      return inFlight;
    },
    fetch: fetchHandler,
    nodeListener(listenerOptions = {}) {
      const hops = proxyHops(listenerOptions.trustProxy, "nodeListener");
      const onError = listenerOptions.onError ?? logHandlerError;
      const bodyCap = listenerOptions.maxBodyBytes ?? options.gate.maxBodyBytes;
      // Everything but the relay of a request to the resource path: the web handler, as before.
      const web = toNodeListener(fetchHandler, {
        trustProxy: listenerOptions.trustProxy ?? false,
        maxBodyBytes: bodyCap,
        onError,
      });
      const resolveOrigin = originResolver();
      const serve = async (req: IncomingMessage, res: ServerResponse) => {
        const started = performance.now();
        const head = new NodeRequestHead(req, req.url ?? "/", 0);
        // RFC 9112 §3.2: one valid Host; then the gate's own Host/Origin check (DNS rebinding).
        if (!resolveOrigin(req, head, hops > 0)) {
          plainResponse(res, 400, "Bad Request: missing or invalid Host header\n");
          return;
        }
        const body =
          req.method === "POST"
            ? await readNodeBody(
                req,
                Math.min(options.gate.readLimit(head), bodyCap),
                head.header("content-length"),
              )
            : undefined;
        const verdict = await options.gate.judge(head, body, started);
        if (!verdict.ok) {
          writeChallenge(res, verdict.answer, false);
          return;
        }
        await relayNode(req, res, verdict);
      };
      return (req, res) => {
        const method = req.method;
        if (
          stdio !== undefined ||
          (method !== "POST" && method !== "GET" && method !== "DELETE") ||
          !isResourceTarget(req.url)
        ) {
          web(req, res);
          return;
        }
        serve(req, res).catch((error: unknown) => {
          if (res.headersSent || res.destroyed) {
            res.destroy();
            return;
          }
          // A client gone mid-body has nobody to answer; anything else is a bare 500, logged.
          if (!req.complete) {
            res.destroy();
            return;
          }
          onError(error);
          plainResponse(res, 500, "Internal Server Error\n");
        });
      };
    },
  };
}
