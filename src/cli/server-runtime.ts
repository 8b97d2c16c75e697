/**
 * What `gatehouse serve` and `gatehouse demo` share: opening the store, serving a web-standard
 * handler over node:http or node:https with request logs, and a graceful shutdown on SIGTERM /
 * SIGINT (stop accepting, let in-flight requests finish, then close the store).
 */
import { existsSync, readFileSync } from "node:fs";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { type FetchHandler, toNodeListener } from "../http/node.js";
import type { Logger } from "../shared/log.js";
import type { AuthorizationStore } from "../storage/contract.js";
import type { ParsedArgs } from "./args.js";
import { type StoreTarget, storeIsDefault, storeTargetFromArgs } from "./config.js";

/**
 * Opens and migrates the store: a SQLite file, or PostgreSQL for a `postgres://` URL
 * (`storage/open`). Loaded lazily so that commands which do not touch storage never load the
 * native SQLite module or `pg`.
 */
export async function openCliStore(target: StoreTarget): Promise<AuthorizationStore> {
  const { openStore } = await import("../storage/open.js");
  // openStore migrates before returning (safe from several instances at once).
  return openStore(target.kind === "postgres" ? target.url : target.path);
}

/** Describes a store target for logs and messages (a database URL without its credentials). */
export function describeStore(target: StoreTarget): string {
  if (target.kind === "sqlite") return `SQLite ${target.path}`;
  try {
    const url = new URL(target.url);
    return `PostgreSQL ${url.hostname}${url.port ? `:${url.port}` : ""}${url.pathname}`;
  } catch {
    return "PostgreSQL";
  }
}

export interface HttpServeOptions {
  host: string;
  port: number;
  /** Extra hosts bound on the same port, best effort (e.g. `::1` next to `127.0.0.1` for `localhost`). */
  alsoHosts?: string[];
  tls?: { cert: string; key: string };
  /** Trusted proxy hops (true = 1); see `toNodeListener`'s `trustProxy`. */
  trustProxy?: boolean | number;
  log: Logger;
  requestLog?: boolean;
  /** Name in log lines (`authorization-server`, `notes-resource`). */
  name: string;
  /** The flag that sets `port`, named in the message when the port is taken (default `--port`). */
  portFlag?: string;
  /** Largest request body the web listener lets through, in bytes (default: toNodeListener's 1 MiB). */
  maxBodyBytes?: number;
}

export interface RunningHttp {
  port: number;
  host: string;
  /** Replaces the handler (servers that need their real port before they can be built). */
  setHandler(handler: FetchHandler): void;
  /**
   * Serves through a node:http listener instead (a server with its own node path, such as the
   * gateway's relay); it takes over from the web handler for every later request. Its requests are
   * not in the request log (`requestLog` wraps the web handler only).
   */
  setNodeListener(listener: (request: IncomingMessage, response: ServerResponse) => void): void;
  /**
   * Stops accepting, waits for in-flight requests (idle keep-alive connections are closed at once)
   * and, after `graceMs`, cuts whatever is left.
   */
  close(graceMs?: number): Promise<void>;
}

function notReady(): Promise<Response> {
  return Promise.resolve(
    new Response("starting\n", {
      status: 503,
      headers: { "retry-after": "1", "content-type": "text/plain" },
    }),
  );
}

/** Adds one structured log line per request: method, path (never the query: it carries codes), status, time. */
function withRequestLog(handler: FetchHandler, log: Logger, name: string): FetchHandler {
  return async (request, info) => {
    const started = performance.now();
    const response = await handler(request, info);
    log.info("request", {
      server: name,
      method: request.method,
      path: new URL(request.url).pathname,
      status: response.status,
      ms: Math.round((performance.now() - started) * 10) / 10,
    });
    return response;
  };
}

function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once("error", onError);
    server.listen(port, host, () => {
      server.off("error", onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/**
 * What a person can do about a failed listen, as one line (the command prints the message, no
 * stack trace, and exits 1). Errors other than these few keep their own message.
 */
export function listenErrorMessage(error: unknown, port: number, host: string, portFlag = "--port"): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case "EADDRINUSE":
      return `port ${port} on ${host} is already in use: stop the other process or pass ${portFlag} 0 (any free port)`;
    case "EACCES":
      return `port ${port} needs privileges: use a port above 1023`;
    case "EADDRNOTAVAIL":
      return `cannot listen on ${host}: no such address on this machine`;
    default:
      return `cannot listen on ${host}:${port}: ${error instanceof Error ? error.message : String(error)}`;
  }
}

function closeGracefully(server: Server, graceMs: number): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve) => {
    // Keep-alive connections that finish their request become idle: close those as they appear.
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    const deadline = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearInterval(sweep);
      clearTimeout(deadline);
      resolve();
    });
    server.closeIdleConnections();
  });
}

/** Serves `handler` (set later with `setHandler`) over http, or https when `tls` is given. */
export async function serveHttp(options: HttpServeOptions): Promise<RunningHttp> {
  let current: FetchHandler = notReady;
  let tlsOptions: { cert: Buffer; key: Buffer } | undefined;
  if (options.tls) {
    try {
      tlsOptions = { cert: readFileSync(options.tls.cert), key: readFileSync(options.tls.key) };
    } catch (error) {
      throw new Error(
        `cannot read the TLS certificate or key: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
      );
    }
  }
  // The adapter's second argument (the client address) goes through to the handler.
  const dispatch: FetchHandler = (request, info) => current(request, info);
  const handler = options.requestLog ? withRequestLog(dispatch, options.log, options.name) : dispatch;
  const webListener = toNodeListener(handler, {
    trustProxy: options.trustProxy ?? false,
    ...(options.maxBodyBytes !== undefined && { maxBodyBytes: options.maxBodyBytes }),
    onError: (error) =>
      options.log.error("handler_error", {
        server: options.name,
        reason: error instanceof Error ? error.message : String(error),
      }),
  });
  let nodeListener: ((request: IncomingMessage, response: ServerResponse) => void) | undefined;
  const listener = (request: IncomingMessage, response: ServerResponse): void =>
    (nodeListener ?? webListener)(request, response);
  const make = (): Server => {
    if (!tlsOptions) return createHttpServer(listener);
    try {
      return createHttpsServer(tlsOptions, listener) as unknown as Server;
    } catch (error) {
      throw new Error(`the TLS certificate or key is not usable: ${(error as Error).message}`);
    }
  };
  const servers: Server[] = [];
  const primary = make();
  let port: number;
  try {
    port = await listenOn(primary, options.port, options.host);
  } catch (error) {
    throw new Error(listenErrorMessage(error, options.port, options.host, options.portFlag));
  }
  servers.push(primary);
  for (const extra of options.alsoHosts ?? []) {
    const server = make();
    try {
      await listenOn(server, port, extra);
      servers.push(server);
    } catch (error) {
      // Best effort: a machine without IPv6 still works through the primary address.
      options.log.info("listen_skipped", {
        server: options.name,
        host: extra,
        reason: (error as NodeJS.ErrnoException).code ?? "error",
      });
    }
  }
  return {
    port,
    host: options.host,
    setHandler(next) {
      current = next;
    },
    setNodeListener(next) {
      nodeListener = next;
    },
    async close(graceMs = 10_000) {
      await Promise.all(servers.map((s) => closeGracefully(s, graceMs)));
    },
  };
}

/**
 * Resolves with the signal name on the first SIGTERM or SIGINT. A second signal while shutting
 * down exits at once with status 1.
 */
export function waitForShutdownSignal(log: Logger): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (received) {
        log.warn("shutdown_forced", { signal });
        process.exit(1);
      }
      received = true;
      log.info("shutdown_started", { signal });
      resolve(signal);
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}

/** Options every admin command (`users`, `clients`, `keys`) takes to find the store. */
export const STORE_OPTIONS = {
  config: {
    type: "string",
    valueName: "file",
    description: "config file naming the store (data / databaseUrl)",
  },
  data: {
    type: "string",
    valueName: "dir",
    description: "data directory of the SQLite database (default ./.gatehouse)",
  },
  "database-url": {
    type: "string",
    valueName: "url",
    description: "postgres:// URL (or GATEHOUSE_DATABASE_URL)",
  },
  json: { type: "boolean", description: "machine-readable output (one JSON object)" },
  help: { type: "boolean", short: "h", description: "show this help" },
} as const;

/** Where an admin command reads and writes, as it tells the operator (issue 26). */
export interface StoreLocation {
  target: StoreTarget;
  /** `SQLite <path>` or `PostgreSQL host:port/database` (never a password). */
  description: string;
  /** The line a command that wrote prints: the store, and whether it was the default or new. */
  note: string;
}

/**
 * The store an admin command's flags name, looked at before it is opened: a SQLite file that does
 * not exist yet is about to be created, which a command that writes says, as it says when no flag
 * chose the store (./.gatehouse in the current directory), so a user added to the wrong store is
 * seen at once rather than at the next sign-in.
 */
export function locateStore(parsed: ParsedArgs): StoreLocation {
  const target = storeTargetFromArgs(parsed);
  const description = describeStore(target);
  const notes = [
    ...(storeIsDefault(parsed) ? ["the default: no --data, --database-url or --config given"] : []),
    ...(target.kind === "sqlite" && !existsSync(target.path) ? ["a new database, created now"] : []),
  ];
  return {
    target,
    description,
    note: `store: ${description}${notes.length ? ` (${notes.join("; ")})` : ""}`,
  };
}

/** Opens the store, runs `body`, and always closes the store. */
export async function withStore<T>(
  target: StoreTarget,
  body: (store: AuthorizationStore) => Promise<T>,
): Promise<T> {
  const store = await openCliStore(target);
  try {
    return await body(store);
  } finally {
    await store.close();
  }
}
