/**
 * The MCP conformance tool's client under test: `node dist/conformance/client.js <server-url>`
 * (or `npm run --silent conformance:client -- <server-url>`).
 *
 * It is a thin MCP client over `createAuthFetch`: everything about authorization is the library's.
 * The tool's mock authorization server redirects at once, so the user agent here just follows the
 * authorization URL without redirects and hands back the `Location` it gets. Scenario context
 * (`MCP_CONFORMANCE_CONTEXT`) supplies pre-registered or self-acting client credentials; which
 * mechanism is used follows from what the context contains, as it would for a configured client.
 */

import { isAuthorizationFlowError } from "../client/errors.js";
import { type CreateAuthFetchOptions, createAuthFetch } from "../client/flow/auth-client.js";
import { clientCredentialsGrant } from "../client/grants/client-credentials.js";
import { enterpriseManagedGrant, jwtBearerGrant } from "../client/grants/jwt-bearer.js";

const CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json";
const REDIRECT_URI = "http://127.0.0.1:33418/callback";

type Context = Record<string, string | undefined>;

function readContext(): Context {
  const raw = process.env.MCP_CONFORMANCE_CONTEXT;
  if (!raw) return {};
  const parsed = JSON.parse(raw) as unknown;
  return typeof parsed === "object" && parsed !== null ? (parsed as Context) : {};
}

/** Follows the authorization URL one hop and returns where the server redirects the user agent. */
async function followRedirect(url: URL): Promise<string> {
  const response = await fetch(url, { redirect: "manual" });
  await response.body?.cancel();
  const location = response.headers.get("location");
  if (response.status < 300 || response.status > 399 || !location) {
    throw new Error(`authorization endpoint answered ${response.status} without a redirect`);
  }
  return new URL(location, url).href;
}

function options(context: Context, protocolVersion: string): CreateAuthFetchOptions {
  const base: CreateAuthFetchOptions = {
    revision: protocolVersion === "2026-07-28" ? "2026-07-28" : "2025-11-25",
    redirectUri: REDIRECT_URI,
    userAgent: followRedirect,
    clientMetadataUrl: CLIENT_METADATA_URL,
    clientName: "gatehouse-conformance-client",
    // The 2025-03-26 fallbacks (no protected resource metadata) are not part of the 2026-07-28
    // flow, whose first step requires the metadata; the tool also retires those scenarios there.
    legacyFallback: protocolVersion !== "2026-07-28",
  };
  const { client_id: clientId, client_secret: clientSecret } = context;
  if (
    context.idp_id_token &&
    context.idp_token_endpoint &&
    context.idp_client_id &&
    clientId &&
    clientSecret
  ) {
    return {
      ...base,
      grant: enterpriseManagedGrant({
        idpTokenEndpoint: context.idp_token_endpoint,
        idpClientId: context.idp_client_id,
        idToken: context.idp_id_token,
        clientId,
        clientSecret,
      }),
    };
  }
  if (context.valid_jwt && clientId) {
    return { ...base, grant: jwtBearerGrant({ clientId, assertion: context.valid_jwt }) };
  }
  if (context.issuer && clientId) {
    return {
      ...base,
      preregisteredClients: {
        [context.issuer]: {
          client_id: clientId,
          ...(clientSecret !== undefined && { client_secret: clientSecret }),
        },
      },
    };
  }
  if (clientId && context.private_key_pem) {
    return {
      ...base,
      grant: clientCredentialsGrant({
        clientId,
        privateKey: context.private_key_pem,
        algorithm: context.signing_algorithm ?? "ES256",
      }),
    };
  }
  if (clientId && clientSecret) {
    return { ...base, grant: clientCredentialsGrant({ clientId, clientSecret }) };
  }
  return base;
}

let nextId = 1;

/** The 2026-07-28 stateless wire: every request carries the protocol version and client info. */
async function statelessCall(
  authFetch: typeof fetch,
  url: string,
  method: string,
  params: Record<string, unknown>,
): Promise<unknown> {
  const version = "2026-07-28";
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": version,
    "mcp-method": method,
  };
  if (method === "tools/call" && typeof params.name === "string") headers["mcp-name"] = params.name;
  const body = {
    jsonrpc: "2.0",
    id: nextId++,
    method,
    params: {
      ...params,
      _meta: {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": { name: "gatehouse-conformance-client", version: "0.1.0" },
        "io.modelcontextprotocol/clientCapabilities": {},
      },
    },
  };
  const response = await authFetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} answered HTTP ${response.status}`);
  const payload = text.startsWith("{")
    ? text
    : (text
        .split(/\r?\n/)
        .find((l) => l.startsWith("data:"))
        ?.slice(5)
        .trim() ?? "{}");
  const message = JSON.parse(payload) as { error?: { message?: string }; result?: unknown };
  if (message.error) throw new Error(`${method} failed: ${message.error.message ?? "error"}`);
  return message.result;
}

async function main(): Promise<number> {
  const serverUrl = process.argv[2];
  if (!serverUrl) {
    process.stderr.write("usage: conformance-client <server-url>\n");
    return 2;
  }
  const protocolVersion = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? "2025-11-25";
  const authFetch = createAuthFetch(options(readContext(), protocolVersion));
  if (protocolVersion === "2026-07-28") {
    const list = (await statelessCall(authFetch, serverUrl, "tools/list", {})) as {
      tools?: Array<{ name: string }>;
    };
    const tool = list.tools?.[0]?.name;
    if (tool) await statelessCall(authFetch, serverUrl, "tools/call", { name: tool, arguments: {} });
    return 0;
  }
  // Loaded only for the session-based wire: the SDK is most of this process's start-up time.
  const [{ Client }, { StreamableHTTPClientTransport }] = await Promise.all([
    import("@modelcontextprotocol/sdk/client/index.js"),
    import("@modelcontextprotocol/sdk/client/streamableHttp.js"),
  ]);
  const client = new Client({ name: "gatehouse-conformance-client", version: "0.1.0" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), { fetch: authFetch });
  await client.connect(transport);
  try {
    const { tools } = await client.listTools();
    const tool = tools[0]?.name;
    if (tool) await client.callTool({ name: tool, arguments: {} });
  } finally {
    await client.close();
  }
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const text = isAuthorizationFlowError(error)
      ? `${error.code} (${error.kind}): ${error.message}`
      : error instanceof Error
        ? error.message
        : String(error);
    process.stderr.write(`conformance client: ${text}\n`);
    process.exitCode = 1;
  },
);
