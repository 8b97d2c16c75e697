/**
 * `gatehouse demo` (what `npm start` runs): the authorization server on SQLite plus the demo notes
 * resource it protects, both on localhost in the insecure loopback development mode, with dynamic
 * registration and Client ID Metadata Documents on and a `demo` user whose password is printed.
 */
import { randomUUID } from "node:crypto";
import { join, resolve } from "node:path";
import type { AuthorizationServerOptions } from "../../authorization-server/core/options.js";
import { hashPassword } from "../../authorization-server/core/password.js";
import { createAuthorizationServer } from "../../authorization-server/index.js";
import {
  DEMO_IDP_ID,
  type DemoIdentityProvider,
  demoUpstreamSignIn,
  startDemoIdentityProvider,
} from "../../demo/identity-provider.js";
import { createNotesResource } from "../../demo/notes-resource.js";
import { jsonLogger } from "../../shared/log.js";
import type { AuthorizationStore } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  integerValue,
  noPositionals,
  type OptionSpecs,
  parseCommandArgs,
  stringValue,
  UsageError,
} from "../args.js";
import { storeTarget } from "../config.js";
import {
  announceKeyEncryptionKeys,
  describeKeySource,
  KEY_ENCRYPTION_OPTIONS,
  resolveKeyEncryptionKeys,
  withKeyEncryptionHint,
} from "../key-encryption.js";
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
  ...KEY_ENCRYPTION_OPTIONS,
  "access-token-ttl": {
    type: "string",
    valueName: "seconds",
    description: "access token lifetime (default 300, minimum 10): short to watch a refresh",
  },
  "upstream-demo": {
    type: "boolean",
    description:
      "also start a local OpenID Connect provider (https on 127.0.0.1, self-signed; needs openssl) and offer sign-in through it",
  },
  "no-request-log": { type: "boolean", description: "no log line per request" },
  json: {
    type: "boolean",
    description: "print one JSON line when ready: issuer, resource, admin, username, password, ...",
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

/**
 * The walk-through printed under "Try:": each command with what to watch for, comments in one
 * column (a command too long for it gets its comment on the next line). `npx gatehouse` is the one
 * form, as in the README: it runs the installed package's command, and in this repository's
 * checkout (after `npm run build`) this package's own.
 */
export function tryLines(notes: string): string[] {
  const steps: [string, string?][] = [
    [`curl -i ${notes}`, "401 + WWW-Authenticate challenge"],
    [`npx gatehouse login ${notes}`, `browser opens: sign in as ${DEMO_USERNAME}, allow notes:read`],
    [`npx gatehouse fetch ${notes}`],
    [
      `npx gatehouse fetch -X POST -H 'content-type: application/json' -d '{"text":"hi"}' ${notes}`,
      "needs notes:write: step-up, consent shows only the new scope",
    ],
    ["npx gatehouse status", "what is stored (never the tokens)"],
    ["npx gatehouse logout"],
  ];
  const column = Math.max(...steps.filter(([c]) => !c.includes("-X POST")).map(([c]) => c.length)) + 4;
  return steps.flatMap(([command, comment]) => {
    const line = `  ${command}`;
    if (!comment) return [line];
    if (command.length + 2 > column) return [line, `  ${" ".repeat(column)}# ${comment}`];
    return [`${line.padEnd(column + 2)}# ${comment}`];
  });
}

export async function run(args: string[]): Promise<number> {
  return runCommand("demo", async () => {
    const parsed = parseCommandArgs(args, OPTIONS);
    if (flag(parsed, "help")) {
      out(USAGE);
      return 0;
    }
    noPositionals(parsed);
    const asPort = integerValue(parsed, "port", 65535) ?? 4000;
    const resourcePort = integerValue(parsed, "resource-port", 65535) ?? 4001;
    const dataDir = resolve(stringValue(parsed, "data") ?? ".gatehouse-demo");
    const target = storeTarget({ data: dataDir, defaultData: ".gatehouse-demo" });
    const json = flag(parsed, "json");
    const requestLog = !flag(parsed, "no-request-log");
    const upstreamDemo = flag(parsed, "upstream-demo");
    const accessTokenTtlSeconds = integerValue(parsed, "access-token-ttl", 86_400);
    // The server refuses less than 10 s at start-up; say so as a usage error instead.
    if (accessTokenTtlSeconds !== undefined && accessTokenTtlSeconds < 10)
      throw new UsageError("--access-token-ttl must be at least 10 seconds");
    const log = jsonLogger();
    const keyFile = stringValue(parsed, "key-encryption-key-file");
    const keyEncryptionKeys = resolveKeyEncryptionKeys({
      ...(keyFile === undefined ? {} : { file: keyFile }),
      dataDir,
    });
    // The summary names the key file; the production banner would only crowd it.
    announceKeyEncryptionKeys(keyEncryptionKeys, log, false, { banner: false });

    // Handlers first: a signal that arrives while starting still shuts down cleanly.
    const shutdownSignal = waitForShutdownSignal(log);
    const store = await openCliStore(target);
    const servers: RunningHttp[] = [];
    let authorizationServer: Awaited<ReturnType<typeof createAuthorizationServer>> | undefined;
    let identityProvider: DemoIdentityProvider | undefined;
    try {
      // `localhost` may resolve to 127.0.0.1 or ::1: answer on both, never on a public address.
      const listenLocal = async (name: string, port: number, portFlag: string) => {
        const http = await serveHttp({
          name,
          host: "127.0.0.1",
          port,
          portFlag,
          alsoHosts: ["::1"],
          log,
          requestLog,
        });
        servers.push(http);
        return http;
      };
      const asHttp = await listenLocal("authorization-server", asPort, "--port");
      const resourceHttp = await listenLocal("notes-resource", resourcePort, "--resource-port");
      const issuer = `http://localhost:${asHttp.port}`;
      // The resource identifier is the notes URL itself, the URL a user calls: RFC 9728 §3.3
      // wants the PRM `resource` identical to it, and the spec's "Canonical server URI" is the
      // most specific URI of the server. (`gatehouse check` holds the demo to that too.)
      const notesUrl = `http://localhost:${resourceHttp.port}/notes`;
      const resource = notesUrl;

      // --upstream-demo: the provider's one redirect URI is Gatehouse's callback for it.
      if (upstreamDemo) {
        identityProvider = await startDemoIdentityProvider({
          redirectUri: `${issuer}/upstream/${DEMO_IDP_ID}/callback`,
        });
      }
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
        keyEncryptionKeys: keyEncryptionKeys.keys,
        ...(accessTokenTtlSeconds !== undefined && { accessTokenTtlSeconds }),
        dynamicRegistration: { enabled: true },
        clientMetadataDocuments: { enabled: true, trust: { kind: "any-https" } },
        ...(identityProvider && { upstreamSignIn: demoUpstreamSignIn(identityProvider) }),
      };
      authorizationServer = await withKeyEncryptionHint(keyEncryptionKeys, () =>
        createAuthorizationServer(options),
      );
      asHttp.setHandler(authorizationServer.fetch);
      const jwksUri = String(authorizationServer.metadata.jwks_uri ?? `${issuer}/jwks.json`);
      const server = authorizationServer;
      const notes = createNotesResource({
        resource,
        // Kept with the users, clients and grants: a restart keeps them all.
        notesFile: join(dataDir, "notes.json"),
        issuer,
        jwksUri,
        scopeHierarchy: DEMO_SCOPE_HIERARCHY,
        logger: log,
        // Co-hosted: a refusal lets a client that steps up by refreshing re-authorize instead
        // (docs/authorization-server.md "Refresh policy").
        onInsufficientScope: (auth) => server.requestStepUp(auth.tokenId),
      });
      resourceHttp.setHandler(notes.fetch);
      const password = await ensureDemoUser(store);

      err(INSECURE_BANNER);
      log.info("ready", { issuer, resource, store: describeStore(target) });
      if (json) {
        outJson({
          issuer,
          resource,
          username: DEMO_USERNAME,
          password,
          notes: notesUrl,
          admin: `${issuer}/admin`,
          account: `${issuer}/account`,
          port: asHttp.port,
          resourcePort: resourceHttp.port,
          metadata: `${issuer}/.well-known/oauth-authorization-server`,
          scopes: DEMO_SCOPES,
          accessTokenTtlSeconds: accessTokenTtlSeconds ?? 300,
          dataDir,
          keyEncryptionKeySource: describeKeySource(keyEncryptionKeys.source),
          ...(identityProvider && { upstreamProvider: identityProvider.issuer }),
        });
      } else {
        out(
          [
            "Gatehouse demo is running (development mode: plain http on localhost only).",
            "",
            `  Authorization server  ${issuer}`,
            `      metadata          ${issuer}/.well-known/oauth-authorization-server`,
            `  Notes resource        ${resource}`,
            "      GET    needs notes:read",
            "      POST   needs notes:write (implies notes:read)",
            `  Demo user             ${DEMO_USERNAME}`,
            `      password          ${password}   (new on every start)`,
            `  Admin page            ${issuer}/admin   (sign in as ${DEMO_USERNAME}, an administrator)`,
            `  Your account          ${issuer}/account`,
            `  Access tokens last    ${accessTokenTtlSeconds ?? 300} s (--access-token-ttl; then the CLI refreshes)`,
            `  Data                  ${dataDir}   (users, clients, grants, keys and notes)`,
            `  Key-encryption key    ${describeKeySource(keyEncryptionKeys.source)}`,
            ...(identityProvider
              ? [
                  `  Upstream provider     ${identityProvider.issuer}   (--upstream-demo: "Continue with Demo identity provider"`,
                  "      on the login page; type any name; your browser warns once about its self-signed certificate)",
                ]
              : []),
            "",
            "Try:",
            ...tryLines(notesUrl),
            "",
            "Stop with Ctrl-C.",
          ].join("\n"),
        );
      }

      await shutdownSignal;
      await Promise.all(servers.map((s) => s.close()));
      servers.length = 0;
      await authorizationServer.close();
      await identityProvider?.close();
      await store.close();
      log.info("shutdown_complete", {});
      return 0;
    } catch (error) {
      await Promise.all(servers.map((s) => s.close(0).catch(() => {})));
      await authorizationServer?.close().catch(() => {});
      await identityProvider?.close().catch(() => {});
      await store.close().catch(() => {});
      throw error;
    }
  });
}
