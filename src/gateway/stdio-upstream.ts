/**
 * A stdio MCP server behind the gateway (`gatehouse gateway --stdio "<command>"`): one child
 * process per MCP session, started by the session's `initialize`, spoken to in newline-delimited
 * JSON-RPC on stdin/stdout (MCP transport spec, stdio), and exposed as Streamable HTTP: a request's
 * answer comes back as JSON, messages the child sends on its own (notifications, its requests)
 * go to the session's `GET` stream.
 *
 * The child is started without a shell, with an environment of only what the operator names
 * (MCP authorization spec: a stdio server takes its credentials from its environment; the
 * gateway's own environment, its keys included, is not handed down), plus the caller's `sub` when
 * asked. Bounded: at most `maxChildren` at once (503 beyond), a line of at most `maxLineBytes`
 * (a child printing more is stopped), `maxQueued` messages waiting for a stream, `requestTimeoutMs`
 * for an answer (504), `idleMs` without a request (stopped). A child that exits takes its session
 * with it: pending requests get a JSON-RPC error, later ones 404, and the client's next
 * `initialize` starts a new child.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { OperationContext } from "../resource-server/operations/gate.js";
import type { JsonRpcId } from "../resource-server/operations/messages.js";
import type { Logger } from "../shared/log.js";

export interface StdioUpstreamOptions {
  /** The program and its arguments (no shell). */
  argv: readonly string[];
  /** The child's whole environment (PATH and the credentials it needs; nothing else is passed). */
  env?: Readonly<Record<string, string>>;
  /** Also put the caller's `sub` in the child's environment under this name. */
  subjectEnv?: string;
  maxChildren?: number;
  idleMs?: number;
  requestTimeoutMs?: number;
  maxLineBytes?: number;
  maxQueued?: number;
  logger?: Logger;
}

export interface StdioUpstream {
  relay(request: Request, context: OperationContext, sessionId: string | undefined): Promise<Response>;
  /** Children running now. */
  readonly children: number;
  /** Stops every child. */
  close(): Promise<void>;
}

interface Pending {
  resolve(message: unknown): void;
  timer: NodeJS.Timeout;
}

interface Session {
  id: string;
  caller: string;
  child: ChildProcess;
  pending: Map<string, Pending>;
  queue: string[];
  stream: ReadableStreamDefaultController<Uint8Array> | undefined;
  idle: NodeJS.Timeout | undefined;
  dead: boolean;
}

const encoder = new TextEncoder();

function rpcError(status: number, code: number, message: string, id: JsonRpcId | undefined = null): Response {
  return new Response(JSON.stringify({ jsonrpc: "2.0", id: id ?? null, error: { code, message } }), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

function idKey(id: unknown): string {
  return JSON.stringify(id);
}

/** Splits a command line into words (single and double quotes, backslash escapes; no expansion). */
export function commandWords(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let quote: '"' | "'" | undefined;
  let started = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === "\\" && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      started = true;
    } else if (c === "\\" && i + 1 < line.length) {
      word += line[++i];
      started = true;
    } else if (/\s/.test(c)) {
      if (started) words.push(word);
      word = "";
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  if (quote) throw new TypeError("unbalanced quote in the command");
  if (started) words.push(word);
  if (words.length === 0) throw new TypeError("the command is empty");
  return words;
}

export function createStdioUpstream(options: StdioUpstreamOptions): StdioUpstream {
  if (options.argv.length === 0) throw new TypeError("argv must name a program");
  const maxChildren = options.maxChildren ?? 16;
  const idleMs = options.idleMs ?? 10 * 60_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 60_000;
  const maxLineBytes = options.maxLineBytes ?? 4 * 1024 * 1024;
  const maxQueued = options.maxQueued ?? 1000;
  const sessions = new Map<string, Session>();
  const log = options.logger;

  const caller = (context: OperationContext) =>
    `${context.auth.subject ?? ""}\0${context.auth.clientId ?? ""}`;

  const end = (session: Session, reason: string) => {
    if (session.dead) return;
    session.dead = true;
    sessions.delete(session.id);
    if (session.idle) clearTimeout(session.idle);
    for (const [, pending] of session.pending) {
      clearTimeout(pending.timer);
      pending.resolve(undefined);
    }
    session.pending.clear();
    try {
      session.stream?.close();
    } catch {
      // already closed by the client
    }
    if (session.child.exitCode === null && session.child.signalCode === null) session.child.kill("SIGKILL");
    log?.info("gateway.stdio_child_stopped", { reason });
  };

  const touch = (session: Session) => {
    if (session.idle) clearTimeout(session.idle);
    session.idle = setTimeout(() => end(session, "idle"), idleMs);
    session.idle.unref();
  };

  /** A message the child sent: the answer to a pending request, or one for the session's stream. */
  const fromChild = (session: Session, line: string) => {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      log?.warn("gateway.stdio_bad_line", { bytes: line.length });
      return;
    }
    const record = message as { id?: unknown; method?: unknown };
    if (record && typeof record === "object" && !("method" in record) && "id" in record) {
      const pending = session.pending.get(idKey(record.id));
      if (pending) {
        session.pending.delete(idKey(record.id));
        clearTimeout(pending.timer);
        pending.resolve(message);
        return;
      }
    }
    const event = `event: message\ndata: ${JSON.stringify(message)}\n\n`;
    if (session.stream) session.stream.enqueue(encoder.encode(event));
    else if (session.queue.length < maxQueued) session.queue.push(event);
    // Beyond the bound, messages nobody reads are dropped rather than kept without limit.
  };

  const start = (context: OperationContext): Session => {
    const env: Record<string, string> = { ...(options.env ?? {}) };
    if (options.subjectEnv && context.auth.subject !== undefined)
      env[options.subjectEnv] = context.auth.subject;
    const child = spawn(options.argv[0]!, options.argv.slice(1), { env, stdio: ["pipe", "pipe", "ignore"] });
    const session: Session = {
      id: randomBytes(24).toString("base64url"),
      caller: caller(context),
      child,
      pending: new Map(),
      queue: [],
      stream: undefined,
      idle: undefined,
      dead: false,
    };
    sessions.set(session.id, session);
    let buffered: Buffer[] = [];
    let size = 0;
    child.stdout!.on("data", (chunk: Buffer) => {
      let start = 0;
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, start)) {
        buffered.push(chunk.subarray(start, i));
        const line = Buffer.concat(buffered).toString("utf8").trim();
        buffered = [];
        size = 0;
        start = i + 1;
        if (line) fromChild(session, line);
        if (session.dead) return;
      }
      size += chunk.length - start;
      if (size > maxLineBytes) return end(session, "line_too_long");
      buffered.push(chunk.subarray(start));
    });
    child.once("error", () => end(session, "spawn_failed"));
    child.once("exit", () => end(session, "exited"));
    child.stdin!.on("error", () => end(session, "stdin_closed"));
    touch(session);
    return session;
  };

  /** Sends messages to the child; resolves with the answers to its requests (undefined: none came). */
  const send = (session: Session, messages: readonly unknown[]): Promise<unknown[]> => {
    const waits: Promise<unknown>[] = [];
    for (const message of messages) {
      const record = message as { id?: unknown; method?: unknown };
      if (typeof record.method === "string" && "id" in record) {
        const key = idKey(record.id);
        waits.push(
          new Promise((resolve) => {
            const timer = setTimeout(() => {
              session.pending.delete(key);
              resolve(null);
            }, requestTimeoutMs);
            session.pending.set(key, { resolve, timer });
          }),
        );
      }
      session.child.stdin!.write(`${JSON.stringify(message)}\n`);
    }
    return Promise.all(waits);
  };

  const answer = async (session: Session, context: OperationContext, headers: Headers): Promise<Response> => {
    const messages = Array.isArray(context.body) ? (context.body as unknown[]) : [context.body];
    const firstRequestId = (messages.find((m) => "id" in (m as object)) as { id?: JsonRpcId } | undefined)
      ?.id;
    // A child that does not read its stdin: what waits for it is bounded, not the client's to grow.
    if (session.child.stdin!.writableLength > maxLineBytes) {
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

  return {
    get children() {
      return sessions.size;
    },
    async relay(request, context, sessionId) {
      const headers = new Headers({ "access-control-expose-headers": "Mcp-Session-Id" });
      if (sessionId === undefined) {
        const first = context.messages[0];
        if (request.method !== "POST" || context.messages.length !== 1 || first?.method !== "initialize") {
          return rpcError(400, -32600, "Bad Request: no session (start one with initialize)");
        }
        if (sessions.size >= maxChildren) {
          log?.warn("gateway.stdio_children_full", { max: maxChildren });
          return rpcError(503, -32603, "Too many MCP sessions at once; try again later", first.id);
        }
        const session = start(context);
        headers.set("mcp-session-id", session.id);
        return answer(session, context, headers);
      }
      const session = sessions.get(sessionId);
      // MCP transport spec: an unknown (or ended) session is 404; another caller's is unknown too.
      if (session === undefined || session.dead || session.caller !== caller(context)) {
        return rpcError(404, -32001, "Session not found");
      }
      touch(session);
      headers.set("mcp-session-id", session.id);
      if (request.method === "DELETE") {
        end(session, "deleted");
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
      for (const session of [...sessions.values()]) end(session, "shutdown");
    },
  };
}
