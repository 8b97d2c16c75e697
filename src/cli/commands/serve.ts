/**
 * `gatehouse serve`: the authorization server as a long-running process. Configuration comes from
 * a JSON file and flags (src/cli/config.ts); state lives in SQLite under `--data` or in
 * PostgreSQL (`--database-url` / GATEHOUSE_DATABASE_URL). Logs are JSON lines on stderr; one ready
 * line goes to stdout.
 */

import { dirname } from "node:path";
import { OPTION_LIMITS } from "../../authorization-server/core/option-limits.js";
import { createAuthorizationServer } from "../../authorization-server/index.js";
import type { Logger } from "../../shared/log.js";
import { jsonLogger } from "../../shared/log.js";
import type { AuthorizationStore } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  noPositionals,
  type OptionSpecs,
  type ParsedArgs,
  parseCommandArgs,
} from "../args.js";
import { buildServeConfig, type ServeConfig, storeFlags } from "../config.js";
import {
  announceKeyEncryptionKeys,
  configuredKeyEncryptionKeys,
  KEY_ENCRYPTION_OPTIONS,
  keyEncryptionKeysForStore,
  withKeyEncryptionHint,
} from "../key-encryption.js";
import { banner, INSECURE_BANNER, out, outJson, runCommand } from "../output.js";
import { describeStore, openCliStore, serveHttp, waitForShutdownSignal } from "../server-runtime.js";

/** An option's limits as the help shows them (the server's resolver decides them). */
function range(name: keyof typeof OPTION_LIMITS): string {
  const { min, max } = OPTION_LIMITS[name];
  return `${min} to ${max}`;
}

export const SERVE_OPTIONS: OptionSpecs = {
  config: { type: "string", valueName: "file", description: "JSON config file (flags override it)" },
  issuer: {
    type: "string",
    valueName: "url",
    description: "issuer identifier: the public https URL of this server",
  },
  port: {
    type: "string",
    valueName: "n",
    description: "port to listen on (0 = any free port; default 8443 with TLS, else 8080)",
  },
  host: {
    type: "string",
    valueName: "addr",
    description: "address to bind (default 0.0.0.0; 127.0.0.1 with --insecure-loopback)",
  },
  data: {
    type: "string",
    valueName: "dir",
    description: "data directory for the SQLite database (default ./.gatehouse)",
  },
  "database-url": {
    type: "string",
    valueName: "url",
    description: "postgres:// URL instead of SQLite (or GATEHOUSE_DATABASE_URL)",
  },
  ...KEY_ENCRYPTION_OPTIONS,
  resource: {
    type: "string",
    multiple: true,
    valueName: "uri",
    description: "a protected resource this server issues tokens for (repeatable)",
  },
  scopes: {
    type: "string",
    multiple: true,
    valueName: "list",
    description: "scopes of the preceding --resource (space or comma separated)",
  },
  "access-token-ttl": {
    type: "string",
    valueName: "s",
    description: `access token lifetime in seconds (default 300; ${range("accessTokenTtlSeconds")})`,
  },
  "code-ttl": {
    type: "string",
    valueName: "s",
    description: `authorization code lifetime in seconds (default 60; ${range("codeTtlSeconds")})`,
  },
  "refresh-idle-ttl": {
    type: "string",
    valueName: "s",
    description: `refresh token idle lifetime in seconds (default 14 days; ${range("refreshTokens.idleTtlSeconds")})`,
  },
  "refresh-absolute-ttl": {
    type: "string",
    valueName: "s",
    description: `grant absolute lifetime in seconds (default 90 days; ${range("refreshTokens.absoluteTtlSeconds")})`,
  },
  "no-refresh-tokens": { type: "boolean", description: "issue no refresh tokens" },
  "no-dynamic-registration": {
    type: "boolean",
    description: "turn off dynamic client registration (RFC 7591)",
  },
  "no-client-metadata-documents": { type: "boolean", description: "turn off Client ID Metadata Documents" },
  "no-device-authorization": {
    type: "boolean",
    description: "turn off the device authorization grant (RFC 8628) and its /device page",
  },
  "no-dpop": {
    type: "boolean",
    description: "issue no DPoP-bound tokens (RFC 9449) and advertise no DPoP algorithms",
  },
  "dpop-require-nonce": {
    type: "boolean",
    description: "require a server nonce in every DPoP proof at the token endpoint (RFC 9449 §8)",
  },
  "no-local-passwords": {
    type: "boolean",
    description: "sign in only through the upstream providers of the config file (no password form)",
  },
  "cimd-allow-host": {
    type: "string",
    multiple: true,
    valueName: "host",
    description: "accept metadata-document client ids only from these hosts",
  },
  "tls-cert": {
    type: "string",
    valueName: "file",
    description: "PEM certificate chain: serve HTTPS directly",
  },
  "tls-key": { type: "string", valueName: "file", description: "PEM private key for --tls-cert" },
  "insecure-loopback": {
    type: "boolean",
    description: "DEVELOPMENT ONLY: plain http issuer on a loopback address",
  },
  "trust-proxy": {
    type: "boolean",
    description: "behind a TLS-terminating proxy: trust X-Forwarded-Proto/Host/For (one proxy hop)",
  },
  "trust-proxy-hops": {
    type: "string",
    valueName: "n",
    description:
      "trusted proxies in a chain (0-16); the client address is the n-th X-Forwarded-For entry from the right",
  },
  "no-request-log": { type: "boolean", description: "no log line per request" },
  json: { type: "boolean", description: "print the ready line as one JSON object" },
  help: { type: "boolean", short: "h", description: "show this help" },
};

const USAGE = formatUsage(
  "gatehouse serve [options]",
  SERVE_OPTIONS,
  [
    "Examples:",
    "  gatehouse serve --issuer https://auth.example.com --tls-cert cert.pem --tls-key key.pem \\",
    "      --resource https://mcp.example.com --scopes 'files:read files:write'",
    "  gatehouse serve --config gatehouse.json --trust-proxy",
    "  gatehouse serve --insecure-loopback --port 9000 --resource http://localhost:9001 --scopes notes:read",
  ].join("\n"),
);

/**
 * Without upstream providers only local users can sign in: a store with none is most often the
 * wrong store (issue 26: `users add` wrote to ./.gatehouse, `serve --data …` read another), so say
 * where this server looked and the command that adds a user there.
 */
async function warnWhenNoUsers(
  store: AuthorizationStore,
  config: ServeConfig,
  parsed: ParsedArgs,
  log: Logger,
): Promise<void> {
  if (config.server.upstreamSignIn) return;
  if ((await store.listUsers()).length > 0) return;
  const where = describeStore(config.store);
  const flags =
    storeFlags(parsed) ||
    (config.store.kind === "sqlite"
      ? `--data ${dirname(config.store.path)}`
      : "(with GATEHOUSE_DATABASE_URL set as for this server)");
  log.warn("no_users", {
    message: `No users in ${where}: nobody can sign in yet. Add one there with: gatehouse users add <username> ${flags}`,
    store: where,
  });
}

/** What an embedding program may change about `serve` (tests wrap the store; the CLI changes nothing). */
export interface ServeHooks {
  /** Wraps the store the server uses, once it is open (it must keep the storage contract). */
  wrapStore?: (store: AuthorizationStore) => AuthorizationStore;
}

export function run(args: string[]): Promise<number> {
  return serve(args);
}

/** `gatehouse serve` with `hooks`: the same command, for programs that embed it. */
export async function serve(args: string[], hooks: ServeHooks = {}): Promise<number> {
  return runCommand("serve", async () => {
    const parsed = parseCommandArgs(args, SERVE_OPTIONS);
    if (flag(parsed, "help")) {
      out(USAGE);
      return 0;
    }
    noPositionals(parsed);
    const config = buildServeConfig(parsed);
    const log = jsonLogger();
    const json = flag(parsed, "json");
    // Before anything opens: a key file with loose permissions is refused here.
    configuredKeyEncryptionKeys(config.keyEncryption);

    // Handlers first: a signal that arrives while starting still shuts down cleanly.
    const shutdownSignal = waitForShutdownSignal(log);
    const opened = await openCliStore(config.store);
    const store = hooks.wrapStore ? hooks.wrapStore(opened) : opened;
    let http: Awaited<ReturnType<typeof serveHttp>> | undefined;
    try {
      // Generated only for a store without sealed keys (key-encryption.ts decides).
      const keyEncryptionKeys = await keyEncryptionKeysForStore(config.keyEncryption, store);
      announceKeyEncryptionKeys(keyEncryptionKeys, log, config.store.kind === "postgres");
      const issuerHost = config.issuer ? new URL(config.issuer).hostname : "localhost";
      http = await serveHttp({
        name: "authorization-server",
        host: config.host,
        port: config.port,
        // `localhost` may resolve to ::1 first: answer there too when bound to 127.0.0.1.
        alsoHosts: config.host === "127.0.0.1" && issuerHost === "localhost" ? ["::1"] : [],
        ...(config.tls ? { tls: config.tls } : {}),
        trustProxy: config.trustProxy,
        log,
        requestLog: config.requestLog,
      });
      const issuer = config.issuer ?? `http://localhost:${http.port}`;
      const server = await withKeyEncryptionHint(keyEncryptionKeys, () =>
        createAuthorizationServer({
          ...config.server,
          issuer,
          store,
          logger: log,
          keyEncryptionKeys: keyEncryptionKeys.keys,
        }),
      );
      // The node listener knows the client address (honouring --trust-proxy); the server takes it
      // as an input of fetch, the key of its registration and login rate limits.
      http.setHandler(server.fetch);
      await warnWhenNoUsers(store, config, parsed, log);
      if (config.insecureLoopback && new URL(issuer).protocol === "http:") banner(INSECURE_BANNER, log);
      log.info("ready", { issuer, host: config.host, port: http.port, store: describeStore(config.store) });
      if (json)
        outJson({ event: "ready", issuer, host: config.host, port: http.port, tls: Boolean(config.tls) });
      else
        out(
          `gatehouse: authorization server ready at ${issuer} (listening on ${config.host}:${http.port}, ${describeStore(config.store)})`,
        );

      await shutdownSignal;
      await http.close();
      http = undefined;
      await server.close();
      await store.close();
      log.info("shutdown_complete", {});
      return 0;
    } catch (error) {
      await http?.close(0).catch(() => {});
      await store.close().catch(() => {});
      throw error;
    }
  });
}
