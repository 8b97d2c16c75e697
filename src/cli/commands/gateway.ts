/**
 * `gatehouse gateway`: protects an existing MCP server (Streamable HTTP or stdio) without touching
 * its code, through the library's `createGateway` (src/gateway/index.ts, `gatehouse-auth/gateway`):
 * the protected resource metadata, the challenges and the operation policy in front, the client's
 * token never passed on. Tokens are JWTs checked against the authorization server's keys (its RFC
 * 8414 metadata names them, or `--jwks-uri`), or are introspected (RFC 7662,
 * `--introspection-client-id`). With `--data` or `--database-url` the gateway shares the
 * authorization server's store and marks grants for step-up on a 403 `insufficient_scope`.
 * Settings come from flags and a JSON config file (`--config`; flags win).
 */
import { readFileSync } from "node:fs";
import { createGateway, type GatewayOptions } from "../../gateway/index.js";
import { commandWords } from "../../gateway/stdio-parts.js";
import { parseOperationPolicy } from "../../resource-server/operations/policy.js";
import { jsonLogger } from "../../shared/log.js";
import { isLoopbackHost } from "../../shared/resource-uri.js";
import type { AuthorizationStore } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  integerValue,
  noPositionals,
  type OptionSpecs,
  parseCommandArgs,
  stringList,
  stringValue,
  UsageError,
} from "../args.js";
import { out, outJson, printUsage, runCommand } from "../output.js";
import { describeStore, openCliStore, serveHttp, waitForShutdownSignal } from "../server-runtime.js";
import {
  absoluteUrl,
  identityAssertionOption,
  introspectionOption,
  mergeConfigFile,
  required,
  stepUpStoreTarget,
  upstreamTokensOption,
} from "./gateway-options.js";

const OPTIONS: OptionSpecs = {
  upstream: {
    type: "string",
    valueName: "url",
    description: "the MCP server to protect (Streamable HTTP endpoint)",
  },
  stdio: {
    type: "string",
    valueName: "command",
    description:
      "instead of --upstream: a stdio MCP server, a child process per session or per user (no shell)",
  },
  env: {
    type: "string",
    multiple: true,
    valueName: "NAME=value",
    description: "with --stdio: a variable of the child's environment (its credentials)",
  },
  "pass-env": {
    type: "string",
    multiple: true,
    valueName: "NAME",
    description: "with --stdio: pass this variable of the gateway's environment to the child",
  },
  "user-env": {
    type: "string",
    valueName: "NAME",
    description: "with --stdio: the caller's sub in this variable",
  },
  "stdio-scope": {
    type: "string",
    valueName: "user|session",
    description: "with --stdio: one child per session (default) or per user (the token's sub)",
  },
  "stdio-upstream-token-env": {
    type: "string",
    multiple: true,
    valueName: "NAME=provider",
    description:
      "with --stdio: the user's access token at this upstream provider (from the authorization server's /upstream/token) in variable NAME",
  },
  "upstream-token-client-id": {
    type: "string",
    valueName: "id",
    description: "the gateway's client id at the authorization server, for /upstream/token",
  },
  "upstream-token-client-secret-file": {
    type: "string",
    valueName: "file",
    description: "the file holding that client's secret (client_secret_basic)",
  },
  "max-children": {
    type: "string",
    valueName: "n",
    description: "with --stdio: children at once (default 16)",
  },
  "idle-seconds": {
    type: "string",
    valueName: "n",
    description: "with --stdio: stop a child after this long without a request (default 600)",
  },
  resource: {
    type: "string",
    valueName: "url",
    description: "the public URL clients call (the canonical resource URI tokens must name)",
  },
  "authorization-server": {
    type: "string",
    valueName: "url",
    description: "the issuer whose access tokens are accepted (JWTs, RFC 9068, or introspected)",
  },
  policy: { type: "string", valueName: "file", description: "the operation policy (YAML or JSON)" },
  "jwks-uri": {
    type: "string",
    valueName: "url",
    description: "the issuer's keys (default: jwks_uri from its RFC 8414 metadata)",
  },
  "introspection-client-id": {
    type: "string",
    valueName: "id",
    description: "check tokens by introspection (RFC 7662) as this confidential client instead of as JWTs",
  },
  "introspection-client-secret-file": {
    type: "string",
    valueName: "file",
    description: "the file holding that client's secret (or GATEHOUSE_INTROSPECTION_CLIENT_SECRET)",
  },
  "introspection-endpoint": {
    type: "string",
    valueName: "url",
    description: "the introspection endpoint (default: introspection_endpoint from the issuer's metadata)",
  },
  data: {
    type: "string",
    valueName: "dir",
    description:
      "the authorization server's SQLite data directory, shared: a 403 insufficient_scope marks the grant for step-up, and a stdio child whose grant or kept upstream token is revoked or rotated is stopped",
  },
  "database-url": {
    type: "string",
    valueName: "url",
    description: "the same with its postgres:// store (or GATEHOUSE_DATABASE_URL)",
  },
  config: { type: "string", valueName: "file", description: "JSON config file (flags override it)" },
  host: { type: "string", valueName: "addr", description: "address to listen on (default 127.0.0.1)" },
  port: {
    type: "string",
    valueName: "n",
    description: "port to listen on (default 8080; 0 = any free port)",
  },
  "user-header": {
    type: "string",
    valueName: "name",
    description: "header telling the upstream the caller's sub (a client's own is dropped)",
  },
  "client-header": {
    type: "string",
    valueName: "name",
    description: "header telling the upstream the client_id",
  },
  "scopes-header": {
    type: "string",
    valueName: "name",
    description: "header telling the upstream the token's scopes",
  },
  "identity-assertion-header": {
    type: "string",
    valueName: "name",
    description:
      "with --upstream: a signed JWT in this header telling the upstream the caller (sub, client_id, scope; aud = --upstream)",
  },
  "identity-assertion-key-file": {
    type: "string",
    valueName: "file",
    description: "the PEM private key (P-256 or Ed25519) signing that assertion",
  },
  "filter-listings": {
    type: "boolean",
    description: "show only what the token may call in tools/list, resources/list, prompts/list (SEP-1881)",
  },
  "max-body-bytes": {
    type: "string",
    valueName: "n",
    description: "largest request body (default 4194304; beyond, 413 with a JSON-RPC error)",
  },
  "allowed-host": {
    type: "string",
    multiple: true,
    valueName: "host[:port]",
    description: "another Host clients may use (the resource's host is always allowed)",
  },
  "trust-proxy": {
    type: "string",
    valueName: "hops",
    description: "trusted proxy hops in front (X-Forwarded-*)",
  },
  "session-key-file": {
    type: "string",
    valueName: "file",
    description: "32+ bytes binding session ids to callers; share it between gateways (default: random)",
  },
  json: { type: "boolean", description: "print one JSON line when ready (url, resource, upstream)" },
  help: { type: "boolean", short: "h", description: "show this help" },
};

const USAGE = formatUsage(
  "gatehouse gateway (--upstream <url> | --stdio <command>) --resource <url> --authorization-server <url> --policy <file> [options]",
  OPTIONS,
  `
Every request to --resource's path needs a valid access token for --resource, and each MCP operation
what --policy says. The client's token is never sent upstream. Logs (one JSON line per decision, on
stderr) never carry tokens or tool arguments. GET /health answers without a token.

Tokens are JWTs checked with the issuer's keys, or, with --introspection-client-id, introspected
(RFC 7662) with that client's secret from --introspection-client-secret-file or the environment
variable GATEHOUSE_INTROSPECTION_CLIENT_SECRET (never a flag: a command line is visible to every
local user). With --data or --database-url (or GATEHOUSE_DATABASE_URL) naming the authorization
server's own store, a 403 insufficient_scope marks the grant, so that a client which answers it by
refreshing (MCP SDK v1) is sent to authorize again for the added scope; and with --stdio, a child
whose grant or kept upstream token is revoked or rotated is stopped within 30 s (checked off the
request path), so a revocation reaches a running child.

--config takes a JSON file whose keys are the flags in camelCase (upstream, stdio, resource,
authorizationServer, policy, jwksUri, introspection: {endpoint, clientId, clientSecretFile}, data,
databaseUrl, host, port, trustProxy, filterListings, maxBodyBytes, allowedHosts, sessionKeyFile,
userHeader, clientHeader, scopesHeader); a flag given too wins.

Example policy (every operation needs mcp:use, delete_file also files:admin; without
"default" anything the policy does not name is refused):
  base: [mcp:use]
  default: {}
  tools: { delete_file: { scopes: [files:admin] } }
`,
);

export async function run(args: string[]): Promise<number> {
  return runCommand("gateway", async () => {
    const parsed = parseCommandArgs(args, OPTIONS);
    if (flag(parsed, "help")) return printUsage(USAGE);
    noPositionals(parsed);
    mergeConfigFile(parsed);
    const stdioCommand = stringValue(parsed, "stdio");
    const upstreamFlag = stringValue(parsed, "upstream");
    if ((stdioCommand === undefined) === (upstreamFlag === undefined)) {
      throw new UsageError("give exactly one of --upstream and --stdio");
    }
    const upstream = upstreamFlag === undefined ? undefined : absoluteUrl(upstreamFlag, "upstream").href;
    const resource = required(stringValue(parsed, "resource"), "resource");
    const issuer = required(stringValue(parsed, "authorization-server"), "authorization-server");
    const policyFile = required(stringValue(parsed, "policy"), "policy");
    let policyText: string;
    try {
      policyText = readFileSync(policyFile, "utf8");
    } catch (error) {
      throw new Error(
        `cannot read the policy ${policyFile}: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
      );
    }
    const policy = parseOperationPolicy(policyText, policyFile);
    for (const name of [
      "stdio-scope",
      "stdio-upstream-token-env",
      "upstream-token-client-id",
      "upstream-token-client-secret-file",
    ]) {
      if (stdioCommand === undefined && parsed.values[name] !== undefined)
        throw new UsageError(`--${name} needs --stdio`);
    }
    const stdioScope = stringValue(parsed, "stdio-scope") ?? "session";
    if (stdioScope !== "user" && stdioScope !== "session") {
      throw new UsageError("--stdio-scope takes user or session");
    }
    const upstreamTokens = upstreamTokensOption(parsed, issuer);
    const identityAssertion = identityAssertionOption(parsed, resource, upstream);
    const introspection = introspectionOption(parsed);
    const stepUpStore = stepUpStoreTarget(parsed);
    const port = integerValue(parsed, "port", 65535) ?? 8080;
    const host = stringValue(parsed, "host") ?? "127.0.0.1";
    const maxBodyBytes = integerValue(parsed, "max-body-bytes", 256 * 1024 * 1024);
    if (maxBodyBytes !== undefined && maxBodyBytes < 1024)
      throw new UsageError("--max-body-bytes must be at least 1024");
    const trustProxy = integerValue(parsed, "trust-proxy", 10) ?? 0;
    let sessionKey: Buffer | undefined;
    const keyFile = stringValue(parsed, "session-key-file");
    if (keyFile !== undefined) {
      sessionKey = readFileSync(keyFile);
      if (sessionKey.length < 32) throw new UsageError("--session-key-file must hold at least 32 bytes");
    }
    const log = jsonLogger();
    const resourceUrl = absoluteUrl(resource, "resource");
    const extraHosts = stringList(parsed, "allowed-host");
    // DNS-rebinding defence on whatever the resource's host (a loopback resource's aliases by default).
    const allowedHosts =
      extraHosts.length === 0 && isLoopbackHost(resourceUrl.hostname)
        ? undefined
        : [resourceUrl.host, ...extraHosts];
    let stdio: GatewayOptions["stdio"];
    if (stdioCommand !== undefined) {
      // The child's environment is what the operator names, never the gateway's own (its keys).
      const env: Record<string, string> = {};
      for (const name of ["PATH", "HOME", ...stringList(parsed, "pass-env")]) {
        const value = process.env[name];
        if (value !== undefined) env[name] = value;
      }
      for (const pair of stringList(parsed, "env")) {
        const eq = pair.indexOf("=");
        if (eq <= 0) throw new UsageError("--env takes NAME=value");
        env[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      let command: string[];
      try {
        command = commandWords(stdioCommand);
      } catch (error) {
        throw new UsageError(`--stdio: ${(error as Error).message}`);
      }
      const subjectEnv = stringValue(parsed, "user-env");
      const maxChildren = integerValue(parsed, "max-children", 10_000);
      stdio = {
        command,
        env,
        scope: stdioScope,
        idleSeconds: integerValue(parsed, "idle-seconds", 86_400) ?? 600,
        ...(subjectEnv !== undefined && { subjectEnv }),
        ...(maxChildren !== undefined && { maxChildren }),
        ...(upstreamTokens && { upstreamTokens }),
      };
    }
    // Opened last, once every flag is checked; closed at shutdown or if the gateway cannot start.
    let store: AuthorizationStore | undefined;
    if (stepUpStore !== undefined) store = await openCliStore(stepUpStore);
    // The shared store also stops a stdio child whose access is gone (revocation.ts).
    if (stdio && store) stdio = { ...stdio, revocation: { store } };
    let gateway: Awaited<ReturnType<typeof createGateway>>;
    try {
      gateway = await createGateway({
        ...(upstream !== undefined && { upstream }),
        ...(stdio && { stdio }),
        resource,
        authorizationServer: issuer,
        policy,
        ...(stringValue(parsed, "jwks-uri") !== undefined && { jwksUri: stringValue(parsed, "jwks-uri") }),
        ...(introspection && { introspection }),
        ...(store && { stepUp: { store } }),
        filterListings: flag(parsed, "filter-listings"),
        trustProxy,
        ...(maxBodyBytes !== undefined && { maxBodyBytes }),
        ...(allowedHosts && { allowedHosts }),
        ...(sessionKey && { sessionKey }),
        ...(identityAssertion && { identityAssertion }),
        identityHeaders: {
          subject: stringValue(parsed, "user-header"),
          clientId: stringValue(parsed, "client-header"),
          scopes: stringValue(parsed, "scopes-header"),
        },
        logger: log,
      });
    } catch (error) {
      await store?.close();
      if (error instanceof Error && /no authorization server metadata found/.test(error.message))
        throw new Error(`${error.message} (give --jwks-uri or --introspection-endpoint)`);
      throw error;
    }
    const running = await serveHttp({ host, port, trustProxy, log, name: "gateway", requestLog: false });
    // The gateway's own node listener: the relay without web objects, bodies capped at the gate's
    // --max-body-bytes (the web listener's 1 MiB default would refuse more before the gate reads it).
    running.setNodeListener(gateway.listener);
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${running.port}`;
    const behind = upstream ?? `stdio: ${stdioCommand}`;
    const assertionJwk = await gateway.identityAssertionJwk();
    const checks = introspection ? "introspection" : "jwt";
    if (flag(parsed, "json"))
      outJson({
        url,
        resource,
        upstream: behind,
        authorization_server: issuer,
        token_check: checks,
        ...(stepUpStore && { step_up_store: describeStore(stepUpStore) }),
        // The public key the upstream verifies the identity assertion with (docs/gateway.md).
        ...(assertionJwk && { identity_assertion_jwk: assertionJwk }),
      });
    else
      out(
        `gatehouse gateway on ${url}: ${resource} -> ${behind} (tokens from ${issuer}, ${checks === "jwt" ? "JWTs" : "introspected"}${stepUpStore ? `; step-up through ${describeStore(stepUpStore)}` : ""})`,
      );
    await waitForShutdownSignal(log);
    // Graceful: stop accepting, let in-flight requests and streams finish (10 s), then cut.
    await running.close(10_000);
    await gateway.close();
    await store?.close();
    log.info("shutdown_complete", { server: "gateway" });
    return 0;
  });
}
