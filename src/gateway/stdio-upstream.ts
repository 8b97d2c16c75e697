/**
 * A stdio MCP server behind the gateway (`gatehouse gateway --stdio "<command>"`): child processes
 * spoken to in newline-delimited JSON-RPC on stdin/stdout (MCP transport spec, stdio), exposed as
 * Streamable HTTP: a request's answer comes back as JSON, messages the child sends on its own
 * (notifications, its requests) go to the session's `GET` stream.
 *
 * One child per MCP session (`scope: "session"`, the default), or one per user (`scope: "user"`,
 * the token's `sub`): a user's sessions share the child. A stdio server speaks to one client, so
 * the gateway keeps the sessions apart: request ids are rewritten to the gateway's own (and back
 * in the answer), the first session's `initialize` answer is replayed to the later ones (whose
 * `initialize` and `notifications/initialized` the child never sees again), and the child's own
 * messages go to every session of the child.
 *
 * The child is started without a shell, with an environment of only what the operator names
 * (MCP authorization spec: a stdio server takes its credentials from its environment; the
 * gateway's own environment, its keys included, is not handed down), plus the caller's `sub` when
 * asked, plus, when asked, the user's access tokens at upstream providers, fetched from the
 * authorization server's `/upstream/token` with the gateway's own client credentials and the
 * token of the request that starts the child (never the MCP client's token itself in the child:
 * spec "Access token privilege restriction", no token passthrough). Each start fetches them again,
 * so a restarted child has a fresh token, and a user whose upstream tokens are gone (grant
 * revoked, provider refused the refresh) gets no child at all.
 *
 * Bounded: at most `maxChildren` children at once and `maxSessionsPerChild` sessions on one (503
 * beyond), a line of at most `maxLineBytes` (a child printing more is stopped), `maxQueued`
 * messages waiting for a stream, `requestTimeoutMs` for an answer (504), `idleMs` without a
 * request (stopped). A child that exits takes its sessions with it: pending requests get a
 * JSON-RPC error, later ones 404, and the client's next `initialize` starts a new child.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { OperationContext } from "../resource-server/operations/gate.js";
import type { JsonRpcId } from "../resource-server/operations/messages.js";
import type { UpstreamTokenClient } from "../resource-server/upstream-token.js";
import type { Logger } from "../shared/log.js";
import { type AccessRecord, accessState, type RevocationStore } from "./revocation.js";
import { idKey, rpcError, upstreamEnv } from "./stdio-parts.js";

export interface StdioUpstreamOptions {
  /** The program and its arguments (no shell). */
  argv: readonly string[];
  /** The child's whole environment (PATH and the credentials it needs; nothing else is passed). */
  env?: Readonly<Record<string, string>>;
  /** Also put the caller's `sub` in the child's environment under this name. */
  subjectEnv?: string;
  /** One child per MCP session (default), or one per user (the token's `sub`) shared by their sessions. */
  scope?: "session" | "user";
  /**
   * The user's upstream access tokens in the child's environment: `variables` maps an environment
   * variable to an upstream provider's id at the authorization server, `client` asks for them
   * (`upstreamTokenClient` with the gateway's own client credentials).
   */
  upstreamTokens?: {
    readonly variables: Readonly<Record<string, string>>;
    readonly client: UpstreamTokenClient;
  };
  maxChildren?: number;
  /** With `scope: "user"`: sessions sharing one child (default 16). */
  maxSessionsPerChild?: number;
  idleMs?: number;
  requestTimeoutMs?: number;
  maxLineBytes?: number;
  maxQueued?: number;
  /**
   * The authorization server's store, shared (revocation.ts): every `everyMs` (default 30 000) each
   * child's grant and kept upstream token sets are read, and a child whose access is gone (grant
   * revoked, sets deleted or rotated) is stopped; a session whose token's grant is gone is ended.
   */
  revocation?: { store: RevocationStore; everyMs?: number; now?: () => number };
  logger?: Logger;
}

export interface StdioUpstream {
  relay(request: Request, context: OperationContext, sessionId: string | undefined): Promise<Response>;
  /** Children running now. */
  readonly children: number;
  /**
   * The user's access is gone (an introspection found a token of theirs revoked): every child of
   * `subject` is stopped, its sessions ended. Answers how many were stopped.
   */
  endUser(subject: string, reason: string): number;
  /** Stops every child. */
  close(): Promise<void>;
}

interface Pending {
  resolve(message: unknown): void;
  timer: NodeJS.Timeout;
  session: Session;
  /** The id the session's client used, put back into the answer. */
  originalId: JsonRpcId;
}

interface Child {
  /** The session's id (scope "session") or the user's key (scope "user"). */
  key: string;
  /** The `sub` of the token that started it. */
  subject: string | undefined;
  /** The token that started it (its credentials came through that token's grant). */
  access: AccessRecord;
  check: NodeJS.Timeout | undefined;
  process: ChildProcess;
  /** By the gateway's own request id. */
  pending: Map<string, Pending>;
  nextId: number;
  sessions: Set<Session>;
  /** The child's answer to the first initialize, replayed to the later sessions of a shared child. */
  initializeResult: unknown;
  /** Set while the first initialize waits for the child's answer. */
  initializing: Promise<void> | undefined;
  idle: NodeJS.Timeout | undefined;
  dead: boolean;
}

interface Session {
  id: string;
  caller: string;
  child: Child;
  /** The token of the session's latest request (a refreshed token carries its grant on). */
  access: AccessRecord;
  queue: string[];
  stream: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** This session's initialize was answered from the child's first one: its initialized notification is not sent. */
  replayed: boolean;
  dead: boolean;
}

const encoder = new TextEncoder();

export function createStdioUpstream(options: StdioUpstreamOptions): StdioUpstream {
  if (options.argv.length === 0) throw new TypeError("argv must name a program");
  const scope = options.scope ?? "session";
  const maxChildren = options.maxChildren ?? 16;
  const maxSessionsPerChild = scope === "user" ? (options.maxSessionsPerChild ?? 16) : 1;
  const idleMs = options.idleMs ?? 10 * 60_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 60_000;
  const maxLineBytes = options.maxLineBytes ?? 4 * 1024 * 1024;
  const maxQueued = options.maxQueued ?? 1000;
  const sessions = new Map<string, Session>();
  const children = new Map<string, Child>();
  /** Children being started (their upstream tokens being fetched), by key: one start per key. */
  const starting = new Map<string, Promise<Child | Response>>();
  const log = options.logger;

  const caller = (context: OperationContext) =>
    `${context.auth.subject ?? ""}\0${context.auth.clientId ?? ""}`;

  const endSession = (session: Session) => {
    if (session.dead) return;
    session.dead = true;
    sessions.delete(session.id);
    session.child.sessions.delete(session);
    for (const [key, pending] of session.child.pending) {
      if (pending.session !== session) continue;
      session.child.pending.delete(key);
      clearTimeout(pending.timer);
      pending.resolve(undefined);
    }
    try {
      session.stream?.close();
    } catch {
      // already closed by the client
    }
  };

  const endChild = (child: Child, reason: string) => {
    if (child.dead) return;
    child.dead = true;
    if (children.get(child.key) === child) children.delete(child.key);
    if (child.idle) clearTimeout(child.idle);
    if (child.check) clearInterval(child.check);
    for (const session of [...child.sessions]) endSession(session);
    for (const [, pending] of child.pending) {
      clearTimeout(pending.timer);
      pending.resolve(undefined);
    }
    child.pending.clear();
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill("SIGKILL");
    log?.info("gateway.stdio_child_stopped", { reason });
  };

  const revocation = options.revocation;
  const providers = Object.values(options.upstreamTokens?.variables ?? {});
  /**
   * One check of a child against the shared store (revocation.ts): its own access, then each
   * session's. A store that cannot be read stops nothing (a database outage is not a revocation);
   * it is logged and read again at the next check.
   */
  const checkChild = async (child: Child) => {
    if (revocation === undefined || child.dead) return;
    const now = (revocation.now ?? Date.now)();
    try {
      const state = await accessState(revocation.store, child.access, providers, now);
      if (state !== "live" && state !== "unknown") {
        log?.warn("gateway.stdio_access_gone", { reason: state });
        endChild(child, state);
        return;
      }
      for (const session of [...child.sessions]) {
        if (session.access.tokenId === child.access.tokenId) continue;
        const own = await accessState(revocation.store, session.access, [], now);
        if (own === "revoked" && !session.dead) {
          log?.warn("gateway.stdio_access_gone", { reason: "session_revoked" });
          endSession(session);
          if (child.sessions.size === 0) endChild(child, "revoked");
        }
      }
    } catch (error) {
      log?.warn("gateway.stdio_access_check_failed", {
        error: error instanceof Error ? error.name : typeof error,
      });
    }
  };

  const touch = (child: Child) => {
    if (child.idle) clearTimeout(child.idle);
    child.idle = setTimeout(() => endChild(child, "idle"), idleMs);
    child.idle.unref();
  };

  const toStreams = (child: Child, message: unknown) => {
    const event = `event: message\ndata: ${JSON.stringify(message)}\n\n`;
    for (const session of child.sessions) {
      if (session.stream) session.stream.enqueue(encoder.encode(event));
      else if (session.queue.length < maxQueued) session.queue.push(event);
      // Beyond the bound, messages nobody reads are dropped rather than kept without limit.
    }
  };

  /** A message the child sent: the answer to a pending request, or one for the sessions' streams. */
  const fromChild = (child: Child, line: string) => {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      log?.warn("gateway.stdio_bad_line", { bytes: line.length });
      return;
    }
    const record = message as { id?: unknown; method?: unknown };
    if (record && typeof record === "object" && !("method" in record) && "id" in record) {
      const pending = child.pending.get(idKey(record.id));
      if (pending) {
        child.pending.delete(idKey(record.id));
        clearTimeout(pending.timer);
        // The answer goes back under the id its own client used.
        pending.resolve({ ...(record as object), id: pending.originalId });
        return;
      }
    }
    toStreams(child, message);
  };

  const startChild = async (
    key: string,
    request: Request,
    context: OperationContext,
    id: JsonRpcId | undefined,
  ): Promise<Child | Response> => {
    const tokens = await upstreamEnv(options.upstreamTokens, log, request, id);
    if (tokens instanceof Response) return tokens;
    const env: Record<string, string> = { ...(options.env ?? {}), ...tokens };
    if (options.subjectEnv && context.auth.subject !== undefined)
      env[options.subjectEnv] = context.auth.subject;
    const proc = spawn(options.argv[0]!, options.argv.slice(1), {
      env,
      stdio: ["pipe", "pipe", "ignore"],
    });
    const child: Child = {
      key,
      subject: context.auth.subject,
      access: { tokenId: context.auth.tokenId },
      check: undefined,
      process: proc,
      pending: new Map(),
      nextId: 1,
      sessions: new Set(),
      initializeResult: undefined,
      initializing: undefined,
      idle: undefined,
      dead: false,
    };
    children.set(key, child);
    let buffered: Buffer[] = [];
    let size = 0;
    proc.stdout!.on("data", (chunk: Buffer) => {
      let start = 0;
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, start)) {
        buffered.push(chunk.subarray(start, i));
        const line = Buffer.concat(buffered).toString("utf8").trim();
        buffered = [];
        size = 0;
        start = i + 1;
        if (line) fromChild(child, line);
        if (child.dead) return;
      }
      size += chunk.length - start;
      if (size > maxLineBytes) return endChild(child, "line_too_long");
      buffered.push(chunk.subarray(start));
    });
    proc.once("error", () => endChild(child, "spawn_failed"));
    proc.once("exit", () => endChild(child, "exited"));
    proc.stdin!.on("error", () => endChild(child, "stdin_closed"));
    touch(child);
    if (revocation !== undefined) {
      // The first check notes the kept sets' versions the child was started with; later ones
      // compare. Off the request path: a timer, not a read per call.
      void checkChild(child);
      child.check = setInterval(() => void checkChild(child), revocation.everyMs ?? 30_000);
      child.check.unref();
    }
    return child;
  };

  /** The child a new session joins: the user's running one, or a new one (bounded). */
  const childFor = async (
    key: string,
    request: Request,
    context: OperationContext,
    id: JsonRpcId | undefined,
  ): Promise<Child | Response> => {
    const running = children.get(key);
    if (running && !running.dead) return running;
    const pending = starting.get(key);
    if (pending) return pending;
    if (children.size + starting.size >= maxChildren) {
      log?.warn("gateway.stdio_children_full", { max: maxChildren });
      return rpcError(503, -32603, "Too many MCP sessions at once; try again later", id);
    }
    const started = startChild(key, request, context, id).finally(() => starting.delete(key));
    starting.set(key, started);
    return started;
  };

  /** Sends messages to the child; resolves with the answers to its requests (undefined: none came). */
  const send = (session: Session, messages: readonly unknown[]): Promise<unknown[]> => {
    const child = session.child;
    const waits: Promise<unknown>[] = [];
    for (const message of messages) {
      let record = message as { id?: JsonRpcId; method?: unknown; params?: Record<string, unknown> };
      if (typeof record.method === "string" && "id" in record) {
        // The gateway's own id: two sessions of one child may both use id 1.
        const id = child.nextId++;
        const key = idKey(id);
        waits.push(
          new Promise((resolve) => {
            const timer = setTimeout(() => {
              child.pending.delete(key);
              resolve(null);
            }, requestTimeoutMs);
            child.pending.set(key, { resolve, timer, session, originalId: record.id ?? null });
          }),
        );
        record = { ...record, id };
      } else if (
        record.method === "notifications/cancelled" &&
        record.params &&
        "requestId" in record.params
      ) {
        // A cancellation names the request by the client's id: the child knows it by the gateway's.
        for (const [key, pending] of child.pending) {
          if (pending.session === session && pending.originalId === record.params.requestId) {
            record = { ...record, params: { ...record.params, requestId: JSON.parse(key) } };
            break;
          }
        }
      }
      child.process.stdin!.write(`${JSON.stringify(record)}\n`);
    }
    return Promise.all(waits);
  };

  const answer = async (session: Session, context: OperationContext, headers: Headers): Promise<Response> => {
    const child = session.child;
    let messages = Array.isArray(context.body) ? (context.body as unknown[]) : [context.body];
    const firstRequestId = (messages.find((m) => "id" in (m as object)) as { id?: JsonRpcId } | undefined)
      ?.id;
    if (session.replayed) {
      // The child was initialized by its first session: this one's notice is not repeated to it.
      messages = messages.filter((m) => (m as { method?: unknown }).method !== "notifications/initialized");
      if (messages.length === 0) return new Response(null, { status: 202, headers });
    }
    // A child that does not read its stdin: what waits for it is bounded, not the client's to grow.
    if (child.process.stdin!.writableLength > maxLineBytes) {
      return rpcError(
        503,
        -32603,
        "The MCP server process is not reading its input; try again later",
        firstRequestId,
      );
    }
    const answers = await send(session, messages);
    if (answers.length === 0) return new Response(null, { status: 202, headers });
    const firstId = firstRequestId;
    if (answers.some((a) => a === undefined)) {
      return rpcError(502, -32603, "The MCP server process exited", firstId);
    }
    if (answers.some((a) => a === null))
      return rpcError(504, -32603, "The MCP server process did not answer in time", firstId);
    headers.set("content-type", "application/json");
    const body = JSON.stringify(Array.isArray(context.body) ? answers : answers[0]);
    return new Response(body, { status: 200, headers });
  };

  /** A new session: started by one initialize, on a new child or (scope "user") the user's own. */
  const open = async (request: Request, context: OperationContext, headers: Headers): Promise<Response> => {
    const first = context.messages[0];
    if (request.method !== "POST" || context.messages.length !== 1 || first?.method !== "initialize") {
      return rpcError(400, -32600, "Bad Request: no session (start one with initialize)");
    }
    const id = randomBytes(24).toString("base64url");
    let key = id;
    if (scope === "user") {
      // One child per user: a token without a subject names no user to share it with.
      if (context.auth.subject === undefined) {
        return rpcError(
          403,
          -32001,
          "This server runs one process per user: the token names no user",
          first.id,
        );
      }
      key = `user\0${context.auth.subject}`;
    }
    const joining = children.get(key);
    const child = await childFor(key, request, context, first.id);
    if (child instanceof Response) return child;
    if (revocation !== undefined && child === joining) {
      // Joining a running child fetches no credentials, so nothing else would notice a token whose
      // grant is revoked (a JWT still verifies until its exp): the store is read (initialize only).
      const state = await accessState(revocation.store, { tokenId: context.auth.tokenId }, [], Date.now());
      if (state === "revoked") {
        return rpcError(403, -32001, "Access to this server was revoked; sign in again", first.id);
      }
    }
    // A session arriving while the child's first initialize is in flight waits for its answer.
    while (child.initializing) await child.initializing;
    if (child.dead) return rpcError(502, -32603, "The MCP server process exited", first.id);
    // Counted after the waits: sessions that joined together are bounded too.
    if (child.sessions.size >= maxSessionsPerChild) {
      log?.warn("gateway.stdio_sessions_full", { max: maxSessionsPerChild });
      return rpcError(503, -32603, "Too many MCP sessions for this user at once; try again later", first.id);
    }
    const session: Session = {
      id,
      caller: caller(context),
      child,
      access: { tokenId: context.auth.tokenId },
      queue: [],
      stream: undefined,
      replayed: false,
      dead: false,
    };
    sessions.set(id, session);
    child.sessions.add(session);
    touch(child);
    headers.set("mcp-session-id", id);
    if (child.initializeResult !== undefined) {
      // The child speaks to one client and was initialized once: its answer is this session's too.
      session.replayed = true;
      headers.set("content-type", "application/json");
      const replay = { jsonrpc: "2.0", id: first.id ?? null, result: child.initializeResult };
      return new Response(JSON.stringify(replay), { status: 200, headers });
    }
    let initialized!: () => void;
    child.initializing = new Promise<void>((resolve) => {
      initialized = resolve;
    });
    try {
      const response = await answer(session, context, headers);
      if (response.status === 200) {
        const text = await response.text();
        const result = (JSON.parse(text) as { result?: unknown }).result;
        if (result !== undefined) child.initializeResult = result;
        return new Response(text, { status: 200, headers: response.headers });
      }
      // No session came of it: its id is not handed out, and a child nobody uses is stopped.
      endSession(session);
      response.headers.delete("mcp-session-id");
      if (child.sessions.size === 0) endChild(child, "initialize_failed");
      return response;
    } finally {
      child.initializing = undefined;
      initialized();
    }
  };

  return {
    get children() {
      return children.size;
    },
    endUser(subject, reason) {
      let stopped = 0;
      for (const child of [...children.values()]) {
        if (child.subject !== subject) continue;
        endChild(child, reason);
        stopped++;
      }
      if (stopped > 0) log?.warn("gateway.stdio_access_gone", { reason, children: stopped });
      return stopped;
    },
    async relay(request, context, sessionId) {
      const headers = new Headers({ "access-control-expose-headers": "Mcp-Session-Id" });
      if (sessionId === undefined) return open(request, context, headers);
      const session = sessions.get(sessionId);
      // MCP transport spec: an unknown (or ended) session is 404; another caller's is unknown too.
      if (session === undefined || session.dead || session.caller !== caller(context)) {
        return rpcError(404, -32001, "Session not found");
      }
      touch(session.child);
      session.access.tokenId = context.auth.tokenId;
      headers.set("mcp-session-id", session.id);
      if (request.method === "DELETE") {
        endSession(session);
        // The last session of a child ends it (a user's child lives while one of their sessions does).
        if (session.child.sessions.size === 0) endChild(session.child, "deleted");
        return new Response(null, { status: 200, headers });
      }
      if (request.method === "GET") {
        if (session.stream) return rpcError(409, -32600, "Conflict: this session's stream is already open");
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            session.stream = controller;
            for (const event of session.queue.splice(0)) controller.enqueue(encoder.encode(event));
          },
          cancel() {
            session.stream = undefined;
          },
        });
        headers.set("content-type", "text/event-stream");
        headers.set("cache-control", "no-store");
        return new Response(body, { status: 200, headers });
      }
      return answer(session, context, headers);
    },
    async close() {
      for (const child of [...children.values()]) endChild(child, "shutdown");
    },
  };
}
