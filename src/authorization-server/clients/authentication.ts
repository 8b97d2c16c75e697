/**
 * Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3):
 * `none`, `client_secret_basic`, `client_secret_post` and `private_key_jwt` (RFC 7523 §2.2).
 */
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  type JWK,
  type JWTVerifyGetKey,
  jwtVerify,
} from "jose";
import { sha256Base64url, timingSafeEqualString } from "../../shared/crypto.js";
import { OAuthError, type OAuthErrorOptions } from "../../shared/errors.js";
import { buildChallenge } from "../../shared/www-authenticate.js";
import type { ClientRecord, TokenEndpointAuthMethod } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { endpointUrl } from "../core/paths.js";
import {
  CLIENT_ASSERTION_ALGORITHMS,
  CLOCK_TOLERANCE_SECONDS,
  lifetimeProblem,
  useJtiOnce,
} from "../policy/assertions.js";
import { DocumentKeysError, documentClientKeys } from "./document-keys.js";

/** RFC 7523 §2.2: the `client_assertion_type` of a JWT client assertion. */
export const JWT_BEARER_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** Longest lifetime accepted for a client assertion (`exp` - `iat`, and `exp` - now), in seconds. */
export const MAX_ASSERTION_LIFETIME_SECONDS = 300;
const MAX_CLIENT_ID_LENGTH = 2048;

/**
 * A failed client authentication. RFC 6749 §5.2: when the client tried the `Authorization` header,
 * the answer is 401 with a `WWW-Authenticate` challenge for the scheme it used.
 */
export class ClientAuthenticationError extends OAuthError {
  readonly wwwAuthenticate: string | undefined;
  constructor(options: OAuthErrorOptions & { wwwAuthenticate?: string }) {
    const { wwwAuthenticate, ...rest } = options;
    super("invalid_client", {
      ...rest,
      status: 401,
      ...(wwwAuthenticate ? { headers: { "www-authenticate": wwwAuthenticate } } : {}),
    });
    this.wwwAuthenticate = wwwAuthenticate;
  }
}

export interface AuthenticatedClient {
  client: ClientRecord;
  method: TokenEndpointAuthMethod;
}

interface Presented {
  method: TokenEndpointAuthMethod;
  clientId: string;
  secret?: string;
  assertion?: string;
}

/** RFC 6749 §2.3.1 / Appendix B: id and secret are form-urlencoded before they go into Basic. */
function formDecode(value: string): string | undefined {
  try {
    return decodeURIComponent(value.replace(/\+/g, " "));
  } catch {
    return undefined;
  }
}

function parseBasic(header: string, realm: string): { clientId: string; secret: string } {
  const malformed = () =>
    new ClientAuthenticationError({
      description: "malformed Basic authorization header",
      wwwAuthenticate: buildChallenge("Basic", { realm }),
    });
  const match = /^Basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(header);
  if (!match) throw malformed();
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon <= 0) throw malformed();
  const clientId = formDecode(decoded.slice(0, colon));
  const secret = formDecode(decoded.slice(colon + 1));
  if (clientId === undefined || secret === undefined || clientId === "" || secret === "") throw malformed();
  return { clientId, secret };
}

/** Reads which authentication the request presents; more than one is refused (RFC 6749 §2.3). */
function presented(request: Request, form: Map<string, string>, realm: string): Presented {
  const authorization = request.headers.get("authorization");
  const basic = authorization !== null && /^basic(?: |$)/i.test(authorization.trimStart());
  const post = form.has("client_secret");
  const jwt = form.has("client_assertion") || form.has("client_assertion_type");
  // RFC 6749 §2.3: "The client MUST NOT use more than one authentication method in each request."
  if (Number(basic) + Number(post) + Number(jwt) > 1) {
    throw new OAuthError("invalid_request", { description: "use exactly one client authentication method" });
  }
  const formClientId = form.get("client_id");
  if (basic) {
    const { clientId, secret } = parseBasic(authorization!.trim(), realm);
    if (formClientId !== undefined && formClientId !== clientId) {
      throw new OAuthError("invalid_request", {
        description: "client_id does not match the Authorization header",
      });
    }
    return { method: "client_secret_basic", clientId, secret };
  }
  if (post) {
    if (formClientId === undefined) {
      throw new ClientAuthenticationError({ description: "client_id is required with client_secret" });
    }
    return { method: "client_secret_post", clientId: formClientId, secret: form.get("client_secret")! };
  }
  if (jwt) {
    // RFC 7521 §4.2: both parameters are required and the type must be one the server supports.
    const assertion = form.get("client_assertion");
    if (form.get("client_assertion_type") !== JWT_BEARER_ASSERTION_TYPE || assertion === undefined) {
      throw new ClientAuthenticationError({ description: "unsupported or incomplete client assertion" });
    }
    let sub: unknown;
    try {
      sub = decodeJwt(assertion).sub;
    } catch {
      throw new ClientAuthenticationError({ description: "client assertion is not a JWT" });
    }
    if (typeof sub !== "string" || (formClientId !== undefined && formClientId !== sub)) {
      throw new ClientAuthenticationError({ description: "client assertion does not name the client" });
    }
    return { method: "private_key_jwt", clientId: sub, assertion };
  }
  if (formClientId === undefined) {
    throw new ClientAuthenticationError({ description: "client authentication is required" });
  }
  return { method: "none", clientId: formClientId };
}

const remoteJwks = new Map<string, JWTVerifyGetKey>();

/** RFC 6749 §5.2 invalid_client for a document client whose key set could not be had (logged). */
function keysRefused(ctx: ServerContext, client: ClientRecord, error: DocumentKeysError) {
  ctx.log.warn("client_jwks.refused", {
    client_id: client.clientId,
    error: error.code,
    detail: error.message,
  });
  return new ClientAuthenticationError({
    description: `client keys could not be used: ${error.publicReason}`,
    detail: error.message,
  });
}

async function keysFor(ctx: ServerContext, client: ClientRecord): Promise<JWTVerifyGetKey | undefined> {
  if (client.jwks && Array.isArray(client.jwks.keys))
    return createLocalJWKSet(client.jwks as { keys: JWK[] });
  // A metadata document's `jwks_uri` was chosen by a stranger: fetched only through the guarded
  // fetch, cached per client (clients/document-keys.ts).
  try {
    const documentKeys = await documentClientKeys(ctx, client);
    if (documentKeys) return documentKeys;
  } catch (error) {
    if (!(error instanceof DocumentKeysError)) throw error;
    throw keysRefused(ctx, client, error);
  }
  // A `jwks_uri` of a dynamically registered client is never fetched (an unguarded outbound fetch
  // chosen by a stranger: server-side request forgery); only clients an operator configured.
  if (client.jwksUri && client.source === "preregistered" && /^https:\/\//i.test(client.jwksUri)) {
    let set = remoteJwks.get(client.jwksUri);
    if (!set) {
      set = createRemoteJWKSet(new URL(client.jwksUri), { timeoutDuration: 5000, cooldownDuration: 30_000 });
      remoteJwks.set(client.jwksUri, set);
    }
    return set;
  }
  return undefined;
}

/**
 * The algorithms a client's assertions may use: the server's list, narrowed to the client's
 * `token_endpoint_auth_signing_alg` when it declared one (RFC 7591 §2: assertions signed with
 * another algorithm MUST be rejected).
 */
function assertionAlgorithms(client: ClientRecord): string[] {
  const declared = client.metadata.token_endpoint_auth_signing_alg;
  if (typeof declared !== "string") return CLIENT_ASSERTION_ALGORITHMS;
  return CLIENT_ASSERTION_ALGORITHMS.filter((alg) => alg === declared);
}

/**
 * RFC 7523 §3 checks of a client assertion: signature with the client's keys, `iss` = `sub` =
 * client_id, `aud` naming this server; then the rules of every assertion (policy/assertions.ts):
 * the lifetime, and the `jti` used once.
 */
async function verifyClientAssertion(
  ctx: ServerContext,
  client: ClientRecord,
  assertion: string,
  audiences: string[],
): Promise<void> {
  const keys = await keysFor(ctx, client);
  if (!keys)
    throw new ClientAuthenticationError({ description: "client has no usable keys for private_key_jwt" });
  let payload: Awaited<ReturnType<typeof jwtVerify>>["payload"];
  try {
    ({ payload } = await jwtVerify(assertion, keys, {
      issuer: client.clientId,
      subject: client.clientId,
      audience: audiences,
      algorithms: assertionAlgorithms(client),
      currentDate: new Date(ctx.now()),
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
      requiredClaims: ["exp", "jti"],
    }));
  } catch (error) {
    // A refetch for an unknown `kid` that failed: the same answer as a first fetch that failed.
    if (error instanceof DocumentKeysError) throw keysRefused(ctx, client, error);
    throw new ClientAuthenticationError({
      description: "client assertion is invalid",
      detail: error instanceof Error ? error.message : String(error),
    });
  }
  const exp = payload.exp!;
  const problem = lifetimeProblem({ exp, iat: payload.iat }, ctx.now(), MAX_ASSERTION_LIFETIME_SECONDS);
  if (problem) throw new ClientAuthenticationError({ description: `client assertion ${problem}` });
  // RFC 7523 §3 item 7: used `jti`s are kept to refuse replays, as for every assertion.
  const verdict = await useJtiOnce(ctx, "client-assertion", { iss: client.clientId, exp, jti: payload.jti });
  if (verdict === "invalid")
    throw new ClientAuthenticationError({ description: "client assertion jti is invalid" });
  if (verdict === "replayed") {
    throw new ClientAuthenticationError({ description: "client assertion was already used" });
  }
}

/**
 * Client authentication at the token, revocation and introspection endpoints (RFC 6749 §2.3,
 * §3.2.1; RFC 7523 §2.2 for `private_key_jwt`). The method used must be the one the client
 * registered; a public client (`none`) is identified by `client_id` only.
 *
 * `endpoint` is the URL being called; it is accepted as `aud` of a client assertion besides the
 * issuer and the token endpoint.
 */
export async function authenticateClient(
  request: Request,
  form: Map<string, string>,
  ctx: ServerContext,
  endpoint: string,
): Promise<AuthenticatedClient> {
  const realm = ctx.options.issuer;
  const p = presented(request, form, realm);
  const challenge = p.method === "client_secret_basic" ? buildChallenge("Basic", { realm }) : undefined;
  const refuse = (description: string, detail?: string) =>
    new ClientAuthenticationError({ description, detail, wwwAuthenticate: challenge });

  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters make a client_id invalid
  if (p.clientId.length > MAX_CLIENT_ID_LENGTH || /[\u0000-\u001f\u007f]/.test(p.clientId)) {
    throw refuse("client_id is invalid");
  }
  const client = await ctx.clients.resolve(p.clientId);
  if (!client) throw refuse("client authentication failed", "unknown client");
  if (client.expiresAt !== undefined && client.expiresAt <= ctx.now()) {
    throw refuse("client authentication failed", "client registration expired");
  }
  if (client.tokenEndpointAuthMethod !== p.method) {
    throw refuse(
      "client authentication failed",
      `client registered ${client.tokenEndpointAuthMethod}, request used ${p.method}`,
    );
  }
  switch (p.method) {
    case "client_secret_basic":
    case "client_secret_post": {
      const presentedHash = sha256Base64url(p.secret!);
      // Compare hashes in constant time; storage holds only the SHA-256 of the secret.
      if (!client.clientSecretHash || !timingSafeEqualString(presentedHash, client.clientSecretHash)) {
        throw refuse("client authentication failed", "wrong client secret");
      }
      // RFC 7591 §3.2.1: client_secret_expires_at (seconds, 0 = never).
      const exp = client.clientSecretExpiresAt ?? 0;
      if (exp > 0 && exp * 1000 <= ctx.now()) throw refuse("client secret has expired");
      break;
    }
    case "private_key_jwt": {
      const issuer = ctx.options.issuer;
      const audiences = [...new Set([issuer, endpointUrl(issuer, "token"), endpoint])];
      await verifyClientAssertion(ctx, client, p.assertion!, audiences);
      break;
    }
    case "none":
      break;
  }
  return { client, method: p.method };
}
