/**
 * `gatehouse clients add|list|remove`: pre-registered OAuth clients, straight on the store.
 * A confidential client's secret is generated, printed once, and stored only as its SHA-256
 * (SECURITY.md: store hashes, never raw secrets).
 */
import { redirectUriProblem } from "../../authorization-server/clients/redirect-uri.js";
import { TOKEN_EXCHANGE_GRANT } from "../../authorization-server/grants/token-exchange.js";
import { DEVICE_CODE_GRANT_TYPE, JWT_BEARER_GRANT } from "../../authorization-server/policy/grants.js";
import { randomToken, sha256Base64url } from "../../shared/crypto.js";
import { isScopeToken } from "../../shared/scopes.js";
import type { ClientRecord, TokenEndpointAuthMethod } from "../../storage/contract.js";
import {
  flag,
  formatUsage,
  noPositionals,
  type OptionSpecs,
  onePositional,
  parseCommandArgs,
  stringList,
  stringValue,
  UsageError,
} from "../args.js";
import { storeTargetFromArgs } from "../config.js";
import { isoTime, out, outJson, printUsage, runSubcommand, table } from "../output.js";
import { locateStore, STORE_OPTIONS, withStore } from "../server-runtime.js";

const ADD_OPTIONS: OptionSpecs = {
  name: {
    type: "string",
    valueName: "text",
    description: "client name shown on the consent page (required)",
  },
  "redirect-uri": {
    type: "string",
    multiple: true,
    valueName: "uri",
    description: "redirect URI, exact string (repeatable, at least one)",
  },
  confidential: {
    type: "boolean",
    description: "a confidential client: generate a client secret (client_secret_basic)",
  },
  "client-credentials": {
    type: "boolean",
    description: "also allow the client_credentials grant (machine-to-machine; needs --confidential)",
  },
  "grant-type": {
    type: "string",
    multiple: true,
    valueName: "type",
    description:
      "a grant type the client may use, as RFC 7591 names it (repeatable; replaces the default authorization_code refresh_token): " +
      "authorization_code, refresh_token, client_credentials, urn:ietf:params:oauth:grant-type:device_code, " +
      "urn:ietf:params:oauth:grant-type:token-exchange, urn:ietf:params:oauth:grant-type:jwt-bearer",
  },
  "auth-method": {
    type: "string",
    valueName: "method",
    description: "client_secret_basic (default with --confidential) or client_secret_post",
  },
  scope: {
    type: "string",
    multiple: true,
    valueName: "scopes",
    description: "scopes the client may ask for (default: any the server offers)",
  },
  "client-id": { type: "string", valueName: "id", description: "choose the client_id (default: random)" },
  ...STORE_OPTIONS,
};
const LIST_OPTIONS: OptionSpecs = { ...STORE_OPTIONS };
const REMOVE_OPTIONS: OptionSpecs = { ...STORE_OPTIONS };

const USAGE = [
  formatUsage(
    "gatehouse clients add --name <text> [--redirect-uri <uri>] [--grant-type <type>] [--confidential] [--scope <scopes>]",
    ADD_OPTIONS,
  ),
  formatUsage("gatehouse clients list", LIST_OPTIONS),
  formatUsage("gatehouse clients remove <client_id>", REMOVE_OPTIONS),
].join("\n");

/** Grant types `--grant-type` accepts, and whether each needs a confidential client. */
const GRANT_TYPES: Readonly<Record<string, { confidential: boolean }>> = {
  authorization_code: { confidential: false },
  refresh_token: { confidential: false },
  // OAuth 2.1 §4.2: only a confidential client may use the client credentials grant.
  client_credentials: { confidential: true },
  [DEVICE_CODE_GRANT_TYPE]: { confidential: false },
  // RFC 8693 §2.1: the exchanging service authenticates (docs/authorization-server.md "Token exchange").
  [TOKEN_EXCHANGE_GRANT]: { confidential: true },
  // Workload identity callers may be public (the assertion is the proof); ID-JAG is judged at /token.
  [JWT_BEARER_GRANT]: { confidential: false },
};

/** The grant types of `clients add`: `--grant-type`s (else the browser defaults), plus `--client-credentials`. */
function grantTypesOf(
  parsed: ReturnType<typeof parseCommandArgs>,
  method: TokenEndpointAuthMethod,
): string[] {
  const chosen = stringList(parsed, "grant-type");
  const grantTypes = chosen.length > 0 ? [...new Set(chosen)] : ["authorization_code", "refresh_token"];
  if (flag(parsed, "client-credentials") && !grantTypes.includes("client_credentials")) {
    grantTypes.push("client_credentials");
  }
  for (const type of grantTypes) {
    const rule = Object.hasOwn(GRANT_TYPES, type) ? GRANT_TYPES[type] : undefined;
    if (!rule) {
      throw new UsageError(
        `--grant-type ${JSON.stringify(type)} is not one of: ${Object.keys(GRANT_TYPES).join(", ")}`,
      );
    }
    if (rule.confidential && method === "none") {
      throw new UsageError(`the ${type} grant needs a confidential client (--confidential)`);
    }
  }
  return grantTypes;
}

/** Client ids chosen on the command line: printable, no spaces, never an https URL. */
const CLIENT_ID = /^[A-Za-z0-9._~:-]{1,128}$/;

function authMethod(parsed: ReturnType<typeof parseCommandArgs>): TokenEndpointAuthMethod {
  const method = stringValue(parsed, "auth-method");
  if (method === undefined) return flag(parsed, "confidential") ? "client_secret_basic" : "none";
  if (method !== "client_secret_basic" && method !== "client_secret_post") {
    throw new UsageError("--auth-method must be client_secret_basic or client_secret_post");
  }
  return method;
}

async function add(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, ADD_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const name = stringValue(parsed, "name");
  if (!name || name.length > 200) throw new UsageError("--name is required (at most 200 characters)");
  const method = authMethod(parsed);
  const grantTypes = grantTypesOf(parsed, method);
  const browserFlow = grantTypes.includes("authorization_code");
  const redirectUris = stringList(parsed, "redirect-uri");
  // Redirect URIs belong to the authorization code grant alone (RFC 7591 §2).
  if (browserFlow && redirectUris.length === 0)
    throw new UsageError("at least one --redirect-uri is required");
  if (!browserFlow && redirectUris.length > 0) {
    throw new UsageError(
      "--redirect-uri needs the authorization_code grant (--grant-type authorization_code)",
    );
  }
  for (const uri of redirectUris) {
    // The same rules as dynamic registration and /authorize (spec "Redirect URIs and state").
    const problem = redirectUriProblem(uri);
    if (problem) throw new UsageError(`--redirect-uri ${JSON.stringify(uri)}: ${problem}`);
  }
  const scopes = stringList(parsed, "scope")
    .flatMap((s) => s.split(/[\s,]+/))
    .filter((s) => s !== "");
  for (const s of scopes)
    if (!isScopeToken(s)) throw new UsageError(`--scope: "${s}" is not a valid scope token`);
  const chosenId = stringValue(parsed, "client-id");
  if (chosenId !== undefined && !CLIENT_ID.test(chosenId)) {
    throw new UsageError("--client-id must be 1-128 characters: letters, digits and . _ ~ : -");
  }
  const clientId = chosenId ?? randomToken(16);
  const secret = method === "none" ? undefined : randomToken(32);
  const responseTypes = browserFlow ? ["code"] : [];
  const scope = scopes.length ? [...new Set(scopes)].join(" ") : undefined;
  const record: ClientRecord = {
    clientId,
    source: "preregistered",
    clientName: name,
    redirectUris,
    grantTypes,
    responseTypes,
    tokenEndpointAuthMethod: method,
    ...(secret ? { clientSecretHash: sha256Base64url(secret), clientSecretExpiresAt: 0 } : {}),
    ...(scope ? { scope } : {}),
    metadata: {
      client_name: name,
      redirect_uris: redirectUris,
      grant_types: grantTypes,
      response_types: responseTypes,
      token_endpoint_auth_method: method,
      ...(scope ? { scope } : {}),
    },
    createdAt: Date.now(),
  };
  const where = locateStore(parsed);
  await withStore(where.target, async (store) => {
    if (await store.getClient(clientId)) throw new Error(`a client with id ${clientId} already exists`);
    await store.createClient(record);
  });
  if (flag(parsed, "json")) {
    outJson({
      client_id: clientId,
      ...(secret ? { client_secret: secret } : {}),
      token_endpoint_auth_method: method,
      redirect_uris: redirectUris,
      grant_types: grantTypes,
      store: where.description,
    });
  } else {
    out(`client_id: ${clientId}`);
    if (secret) out(`client_secret: ${secret}\n(shown once; only its hash is stored)`);
    out(
      `auth method: ${method}; grant types: ${grantTypes.join(" ")}${
        redirectUris.length ? `; redirect URIs: ${redirectUris.join(" ")}` : ""
      }`,
    );
    out(where.note);
  }
  return 0;
}

async function list(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, LIST_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  noPositionals(parsed);
  const clients = await withStore(storeTargetFromArgs(parsed), (store) => store.listClients());
  clients.sort((a, b) => a.createdAt - b.createdAt);
  if (flag(parsed, "json")) {
    outJson({
      clients: clients.map((c) => ({
        client_id: c.clientId,
        client_name: c.clientName,
        source: c.source,
        token_endpoint_auth_method: c.tokenEndpointAuthMethod,
        redirect_uris: c.redirectUris,
        scope: c.scope,
        created_at: isoTime(c.createdAt),
      })),
    });
  } else if (clients.length === 0) {
    out("no clients (add one with: gatehouse clients add --name <text> --redirect-uri <uri>)");
  } else {
    out(
      table(
        ["CLIENT_ID", "NAME", "SOURCE", "AUTH", "REDIRECT URIS"],
        clients.map((c) => [
          c.clientId,
          // Names come from registrations: show them as inert text on one line.
          // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters
          (c.clientName ?? "-").replace(/[\u0000-\u001f\u007f]/g, "?").slice(0, 40),
          c.source,
          c.tokenEndpointAuthMethod,
          c.redirectUris.join(" "),
        ]),
      ),
    );
  }
  return 0;
}

async function remove(args: string[]): Promise<number> {
  const parsed = parseCommandArgs(args, REMOVE_OPTIONS);
  if (flag(parsed, "help")) return printUsage(USAGE);
  const clientId = onePositional(parsed, "a client_id");
  const where = locateStore(parsed);
  const removed = await withStore(where.target, async (store) => {
    // End what the client holds before it disappears: its grants carry its tokens.
    for (const grant of await store.listGrants({ clientId }))
      await store.revokeGrant(grant.grantId, Date.now());
    return store.deleteClient(clientId);
  });
  if (!removed) throw new Error(`no client with id ${clientId} in ${where.description}`);
  if (flag(parsed, "json")) outJson({ client_id: clientId, removed: true, store: where.description });
  else out(`removed client ${clientId} (its grants are revoked)\n${where.note}`);
  return 0;
}

export async function run(args: string[]): Promise<number> {
  return runSubcommand("clients", USAGE, { add, list, remove }, args);
}
