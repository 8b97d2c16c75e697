/**
 * `gatehouse demo` (what `npm start` runs): the authorization server on SQLite plus the demo notes
 * resource it protects, both on localhost in the insecure loopback development mode, with dynamic
 * registration and Client ID Metadata Documents on and a `demo` user whose password is printed.
 */
import { randomUUID } from "node:crypto";
import { createAuthorizationServer } from "../../authorization-server/index.js";
import type { AuthorizationServerOptions } from "../../authorization-server/options.js";
import { hashPassword } from "../../authorization-server/password.js";
import { createNotesResource } from "../../demo/notes-resource.js";
import { jsonLogger } from "../../shared/log.js";
import type { AuthorizationStore } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  integerValue,
  type OptionSpecs,
  parseCommandArgs,
  stringValue,
  UsageError,
} from "../args.js";
import { storeTarget } from "../config.js";
import { err, generatePassword, INSECURE_BANNER, out, outJson, runCommand } from "../output.js";
import {
  describeStore,
  openCliStore,
  type RunningHttp,
  serveHttp,
  waitForShutdownSignal,
} from "../server-runtime.js";

const OPTIONS: OptionSpecs = {
  port: {
    type: "string",
    valueName: "n",
    description: "authorization server port (default 4000; 0 = any free port)",
  },
  "resource-port": {
    type: "string",
    valueName: "n",
    description: "notes resource port (default 4001; 0 = any free port)",
  },
  data: { type: "string", valueName: "dir", description: "data directory (default ./.gatehouse-demo)" },
  "no-request-log": { type: "boolean", description: "no log line per request" },
  json: {
    type: "boolean",
    description: "print one JSON line when ready: issuer, resource, username, password, ...",
  },
  help: { type: "boolean", short: "h", description: "show this help" },
};

const USAGE = formatUsage("gatehouse demo [options]", OPTIONS);

export const DEMO_USERNAME = "demo";
export const DEMO_SCOPES = ["notes:read", "notes:write"];
/** notes:write implies notes:read, at the authorization server and at the resource. */
export const DEMO_SCOPE_HIERARCHY: Record<string, string[]> = { "notes:write": ["notes:read"] };

/**
 * Creates the demo user, or resets its password when the data directory already has it: the
 * password is only ever held as a hash, so a fresh one is the only one that can be printed.
 */
async function ensureDemoUser(store: AuthorizationStore): Promise<string> {
  const password = generatePassword();
  const hash = await hashPassword(password);
  const existing = await store.getUserByUsername(DEMO_USERNAME);
  if (existing) await store.setUserPassword(existing.id, hash);
  else {
    await store.createUser({
      id: randomUUID(),
      username: DEMO_USERNAME,
      passwordHash: hash,
      isAdmin: true,
      createdAt: Date.now(),
    });
  }
  return password;
}

export async function run(args: string[]): Promise<number> {
  return runCommand("demo", async () => {
    const parsed = parseCommandArgs(args, OPTIONS);
    if (flag(parsed, "help")) {
      out(USAGE);
      return 0;
    }
    if (parsed.positionals.length)
      throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[0])}`);
    const asPort = integerValue(parsed, "port", 65535) ?? 4000;
    const resourcePort = integerValue(parsed, "resource-port", 65535) ?? 4001;
    const target = storeTarget({ data: stringValue(parsed, "data"), defaultData: ".gatehouse-demo" });
    const json = flag(parsed, "json");
    const requestLog = !flag(parsed, "no-request-log");
    const log = jsonLogger();

    // Handlers first: a signal that arrives while starting still shuts down cleanly.
    const shutdownSignal = waitForShutdownSignal(log);
    const store = await openCliStore(target);
    const servers: RunningHttp[] = [];
    let authorizationServer: Awaited<ReturnType<typeof createAuthorizationServer>> | undefined;
    try {
      // `localhost` may resolve to 127.0.0.1 or ::1: answer on both, never on a public address.
      const listenLocal = async (name: string, port: number) => {
        const http = await serveHttp({ name, host: "127.0.0.1", port, alsoHosts: ["::1"], log, requestLog });
        servers.push(http);
        return http;
      };
      const asHttp = await listenLocal("authorization-server", asPort);
      const resourceHttp = await listenLocal("notes-resource", resourcePort);
      const issuer = `http://localhost:${asHttp.port}`;
      const resource = `http://localhost:${resourceHttp.port}`;

      const options: AuthorizationServerOptions = {
        issuer,
        store,
        logger: log,
        resources: [{ uri: resource, name: "Gatehouse demo notes", scopes: DEMO_SCOPES }],
        scopeDescriptions: {
          "notes:read": "Read your notes",
          "notes:write": "Create notes (includes reading them)",
        },
        scopeHierarchy: DEMO_SCOPE_HIERARCHY,
        allowInsecureLoopback: true,
        dynamicRegistration: { enabled: true },
        clientMetadataDocuments: { enabled: true, trust: { kind: "any-https" } },
      };
      authorizationServer = await createAuthorizationServer(options);
      asHttp.setHandler(authorizationServer.fetch);
      const jwksUri = String(authorizationServer.metadata.jwks_uri ?? `${issuer}/jwks.json`);
      const notes = createNotesResource({
        resource,
        issuer,
        jwksUri,
        scopeHierarchy: DEMO_SCOPE_HIERARCHY,
        logger: log,
      });
      resourceHttp.setHandler(notes.fetch);
      const password = await ensureDemoUser(store);

      err(INSECURE_BANNER);
      log.info("ready", { issuer, resource, store: describeStore(target) });
      const dataDir = target.kind === "sqlite" ? target.path.replace(/\/[^/]+$/, "") : undefined;
      if (json) {
        outJson({
          issuer,
          resource,
          username: DEMO_USERNAME,
          password,
          notes: `${resource}/notes`,
          port: asHttp.port,
          resourcePort: resourceHttp.port,
          metadata: `${issuer}/.well-known/oauth-authorization-server`,
          scopes: DEMO_SCOPES,
          dataDir,
        });
      } else {
        out(
          [
            "Gatehouse demo is running (development mode: plain http on localhost only).",
            "",
            `  Authorization server  ${issuer}`,
            `      metadata          ${issuer}/.well-known/oauth-authorization-server`,
            `  Notes resource        ${resource}`,
            `      GET  ${resource}/notes   needs notes:read`,
            `      POST ${resource}/notes   needs notes:write (implies notes:read)`,
            `  Demo user             ${DEMO_USERNAME}`,
            `      password          ${password}   (new on every start)`,
            `  Data                  ${dataDir ?? describeStore(target)}`,
            "",
            "Try:",
            `  curl -i ${resource}/notes        # 401 and a WWW-Authenticate challenge`,
            `  gatehouse login ${resource}      # opens the browser: log in as ${DEMO_USERNAME}`,
            `  gatehouse fetch ${resource}/notes`,
            "",
            "Stop with Ctrl-C.",
          ].join("\n"),
        );
      }

      await shutdownSignal;
      await Promise.all(servers.map((s) => s.close()));
      servers.length = 0;
      await authorizationServer.close();
      await store.close();
      log.info("shutdown_complete", {});
      return 0;
    } catch (error) {
      await Promise.all(servers.map((s) => s.close(0).catch(() => {})));
      await authorizationServer?.close().catch(() => {});
      await store.close().catch(() => {});
      throw error;
    }
  });
}
