/**
 * `gatehouse gateway`: protects an existing Streamable HTTP MCP server without touching its code
 * (src/gateway/http-gateway.ts): the protected resource metadata, the challenges and the
 * operation policy in front, the client's token never passed on. Tokens are JWTs checked against
 * the authorization server's keys (its RFC 8414 metadata names them, or `--jwks-uri`).
 */
import { readFileSync } from "node:fs";
import { createHttpGateway } from "../../gateway/http-gateway.js";
import { identityAssertionSigner } from "../../gateway/identity-assertion.js";
import { commandWords, createStdioUpstream } from "../../gateway/stdio-upstream.js";
import { cachedVerifier } from "../../resource-server/cache.js";
import { jwtVerifier } from "../../resource-server/jwt-verifier.js";
import { createOperationGate } from "../../resource-server/operations/gate.js";
import { parseOperationPolicy } from "../../resource-server/operations/policy.js";
import { createResourceServer } from "../../resource-server/resource-server.js";
import { upstreamTokenClient } from "../../resource-server/upstream-token.js";
import { jsonLogger } from "../../shared/log.js";
import { isLoopbackHost } from "../../shared/resource-uri.js";
import { authorizationServerMetadataUrls } from "../../shared/well-known.js";
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
import { serveHttp, waitForShutdownSignal } from "../server-runtime.js";

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
    description: "the issuer whose access tokens are accepted (JWTs, RFC 9068)",
  },
  policy: { type: "string", valueName: "file", description: "the operation policy (YAML or JSON)" },
  "jwks-uri": {
    type: "string",
    valueName: "url",
    description: "the issuer's keys (default: jwks_uri from its RFC 8414 metadata)",
  },
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
  "max-body-bytes": { type: "string", valueName: "n", description: "largest request body (default 4194304)" },
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

Example policy (every operation needs mcp:use, delete_file also files:admin; without
"default" anything the policy does not name is refused):
  base: [mcp:use]
  default: {}
  tools: { delete_file: { scopes: [files:admin] } }
`,
);

function required(value: string | undefined, name: string): string {
  if (value === undefined) throw new UsageError(`--${name} is required`);
  return value;
}

function absoluteUrl(value: string, name: string): URL {
  try {
    return new URL(value);
  } catch {
    throw new UsageError(`--${name} must be an absolute URL`);
  }
}

/** The issuer's `jwks_uri` from its RFC 8414 metadata (bounded read, exact issuer check, §3.3). */
async function discoverJwksUri(issuer: string): Promise<string> {
  for (const { url } of authorizationServerMetadataUrls(issuer)) {
    let response: Response;
    try {
      response = await fetch(url, { redirect: "error", signal: AbortSignal.timeout(10_000) });
    } catch {
      continue;
    }
    if (!response.ok) {
      await response.body?.cancel();
      continue;
    }
    const text = await response.text();
    if (text.length > 256 * 1024) throw new Error(`the authorization server metadata at ${url} is too large`);
    const metadata = JSON.parse(text) as { issuer?: unknown; jwks_uri?: unknown };
    if (metadata.issuer !== issuer) {
      throw new Error(`the metadata at ${url} names another issuer (RFC 8414 §3.3)`);
    }
    if (typeof metadata.jwks_uri !== "string") throw new Error(`the metadata at ${url} has no jwks_uri`);
    return metadata.jwks_uri;
  }
  throw new Error(`no authorization server metadata found for ${issuer} (give --jwks-uri)`);
}

/**
 * `--stdio-upstream-token-env NAME=provider`: the user's upstream token in the child's
 * environment, asked of the authorization server's /upstream/token with the gateway's own client
 * credentials (a pre-registered confidential client the provider's keepTokens lists for
 * --resource). The secret comes from a file: a command line is visible to every local user.
 */
function upstreamTokensOption(parsed: ReturnType<typeof parseCommandArgs>, issuer: string) {
  const pairs = stringList(parsed, "stdio-upstream-token-env");
  const clientId = stringValue(parsed, "upstream-token-client-id");
  const secretFile = stringValue(parsed, "upstream-token-client-secret-file");
  if (pairs.length === 0) {
    if (clientId !== undefined || secretFile !== undefined)
      throw new UsageError(
        "--upstream-token-client-id and its secret file go with --stdio-upstream-token-env",
      );
    return undefined;
  }
  if (clientId === undefined || secretFile === undefined) {
    throw new UsageError(
      "--stdio-upstream-token-env needs --upstream-token-client-id and --upstream-token-client-secret-file",
    );
  }
  const variables: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    const name = pair.slice(0, eq);
    const provider = pair.slice(eq + 1);
    if (eq <= 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || provider === "") {
      throw new UsageError("--stdio-upstream-token-env takes NAME=provider (NAME a variable name)");
    }
    variables[name] = provider;
  }
  let clientSecret: string;
  try {
    clientSecret = readFileSync(secretFile, "utf8").trim();
  } catch (error) {
    throw new UsageError(
      `cannot read --upstream-token-client-secret-file: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  if (clientSecret === "") throw new UsageError("--upstream-token-client-secret-file is empty");
  let client: ReturnType<typeof upstreamTokenClient>;
  try {
    client = upstreamTokenClient({ issuer, clientAuth: { clientId, clientSecret } });
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  return { variables, client };
}

/**
 * `--identity-assertion-header` with `--identity-assertion-key-file`: the signed identity
 * assertion to the HTTP upstream (src/gateway/identity-assertion.ts), `iss` the resource and `aud`
 * the upstream URL.
 */
function identityAssertionOption(
  parsed: ReturnType<typeof parseCommandArgs>,
  resource: string,
  upstream: string | undefined,
) {
  const header = stringValue(parsed, "identity-assertion-header");
  const keyFile = stringValue(parsed, "identity-assertion-key-file");
  if (header === undefined && keyFile === undefined) return undefined;
  if (header === undefined || keyFile === undefined) {
    throw new UsageError("--identity-assertion-header and --identity-assertion-key-file go together");
  }
  if (upstream === undefined) throw new UsageError("--identity-assertion-header is for --upstream");
  let pem: string;
  try {
    pem = readFileSync(keyFile, "utf8");
  } catch (error) {
    throw new UsageError(
      `cannot read --identity-assertion-key-file: ${(error as NodeJS.ErrnoException).code ?? "error"}`,
    );
  }
  try {
    return {
      header,
      signer: identityAssertionSigner({ privateKey: pem, issuer: resource, audience: upstream }),
    };
  } catch (error) {
    // The key's text is never echoed: only why it is refused.
    throw new UsageError(
      `--identity-assertion-key-file: ${error instanceof TypeError && /P-256|private key/.test(error.message) ? error.message : "not a PEM private key"}`,
    );
  }
}

export async function run(args: string[]): Promise<number> {
  return runCommand("gateway", async () => {
    const parsed = parseCommandArgs(args, OPTIONS);
    if (flag(parsed, "help")) return printUsage(USAGE);
    noPositionals(parsed);
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
    const jwksUri = stringValue(parsed, "jwks-uri") ?? (await discoverJwksUri(issuer));
    const resourceServer = createResourceServer({
      resource,
      authorizationServers: [issuer],
      scopesSupported: policy.scopesNamed.length ? [...policy.scopesNamed] : undefined,
      verifier: cachedVerifier(jwtVerifier({ issuer, audience: resource, jwksUri })),
      allowedHosts,
      logger: log,
    });
    const gate = createOperationGate(resourceServer, {
      policy,
      maxBodyBytes,
      filterListings: flag(parsed, "filter-listings"),
      logger: log,
    });
    let stdio: ReturnType<typeof createStdioUpstream> | undefined;
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
      let argv: string[];
      try {
        argv = commandWords(stdioCommand);
      } catch (error) {
        throw new UsageError(`--stdio: ${(error as Error).message}`);
      }
      stdio = createStdioUpstream({
        argv,
        env,
        scope: stdioScope,
        upstreamTokens,
        subjectEnv: stringValue(parsed, "user-env"),
        maxChildren: integerValue(parsed, "max-children", 10_000),
        idleMs: (integerValue(parsed, "idle-seconds", 86_400) ?? 600) * 1000,
        logger: log,
      });
    }
    const gateway = createHttpGateway({
      upstream,
      stdio,
      resourceServer,
      gate,
      sessionKey,
      identityAssertion,
      identityHeaders: {
        subject: stringValue(parsed, "user-header"),
        clientId: stringValue(parsed, "client-header"),
        scopes: stringValue(parsed, "scopes-header"),
      },
      logger: log,
    });
    const running = await serveHttp({ host, port, trustProxy, log, name: "gateway", requestLog: false });
    running.setHandler((request) => gateway.fetch(request));
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${running.port}`;
    const behind = upstream ?? `stdio: ${stdioCommand}`;
    const assertionJwk = await identityAssertion?.signer.publicJwk();
    if (flag(parsed, "json"))
      outJson({
        url,
        resource,
        upstream: behind,
        authorization_server: issuer,
        // The public key the upstream verifies the identity assertion with (docs/gateway.md).
        ...(assertionJwk && { identity_assertion_jwk: assertionJwk }),
      });
    else out(`gatehouse gateway on ${url}: ${resource} -> ${behind} (tokens from ${issuer})`);
    await waitForShutdownSignal(log);
    // Graceful: stop accepting, let in-flight requests and streams finish (10 s), then cut.
    await running.close(10_000);
    await stdio?.close();
    log.info("shutdown_complete", { server: "gateway" });
    return 0;
  });
}
