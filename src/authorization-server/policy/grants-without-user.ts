/**
 * Grants without a user (DESIGN.md "Self-registered clients act for a user"). A client that
 * registered itself (RFC 7591 dynamic registration, a Client ID Metadata Document) is anyone on
 * the internet: it gets tokens only for a user who signed in and approved it. A grant that issues a
 * token with no user behind it (client_credentials, OAuth 2.1 §4.2; a workload's JWT, RFC 7523; a
 * token exchange, RFC 8693) is for clients an operator knows:
 *
 * - a pre-registered client (configuration or `gatehouse clients add`), or
 * - a dynamically registered client whose registration presented an initial access token the
 *   operator configured (RFC 7591 §3: the registration endpoint MAY require one), and then only
 *   `client_credentials` within that token's scopes, and only while that token stays configured.
 *
 * Everything else is refused: at registration (`invalid_client_metadata`, endpoints/register.ts)
 * and again at the token endpoint (`unauthorized_client`, RFC 6749 §5.2), where it is decided
 * here, so a row stored by an older version, or a document listing the grant, opens nothing.
 */
import { sha256Base64url, timingSafeEqualString } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import type { InitialAccessTokenOptions } from "../core/options.js";

/** The grants that issue a token with no user's approval behind it. */
export type GrantWithoutUser = "client_credentials" | "workload_identity" | "token_exchange";

/**
 * The metadata key under which registration records the SHA-256 of the initial access token a
 * dynamic client registered with. Written by the server only (register.ts copies the fields it
 * knows, so a caller cannot send it) and never echoed in a registration response.
 */
export const REGISTERED_WITH_TOKEN = "gatehouse_initial_access_token_sha256";

/** What an allowed grant may carry at most: `scopes` undefined means no ceiling beyond the client's. */
export interface GrantWithoutUserAllowance {
  scopes?: ReadonlySet<string>;
}

/** RFC 6750 §2.1: `Bearer` and a b64token. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

function invalidToken(): OAuthError {
  // RFC 7591 §3 defers to RFC 6750 §3.1 for a bad initial access token: 401 with a challenge.
  return new OAuthError("invalid_token", {
    description: "the initial access token is not valid",
    headers: { "www-authenticate": 'Bearer error="invalid_token"' },
  });
}

/** The configured token whose hash is `hash`, compared in constant time against each. */
function configuredToken(ctx: ServerContext, hash: string): InitialAccessTokenOptions | undefined {
  let found: InitialAccessTokenOptions | undefined;
  for (const token of ctx.options.dynamicRegistration.initialAccessTokens ?? []) {
    if (timingSafeEqualString(token.sha256, hash)) found = token;
  }
  return found;
}

/**
 * The initial access token a registration request presents (RFC 7591 §3): undefined when it sends
 * none or when this server configures none (the header then means nothing here, as before), the
 * configured token it matches, or 401 `invalid_token` for any other.
 */
export function registrationAllowance(
  ctx: ServerContext,
  request: Request,
): InitialAccessTokenOptions | undefined {
  const header = request.headers.get("authorization");
  if (header === null || !ctx.options.dynamicRegistration.initialAccessTokens?.length) return undefined;
  const match = BEARER.exec(header);
  if (!match) throw invalidToken();
  const token = configuredToken(ctx, sha256Base64url(match[1]!));
  if (!token) throw invalidToken();
  return token;
}

/** Whether `client` may use `grant` without a user, and within which scopes; undefined = refused. */
export function grantWithoutUserAllowance(
  ctx: ServerContext,
  client: ClientRecord,
  grant: GrantWithoutUser,
): GrantWithoutUserAllowance | undefined {
  if (client.source === "preregistered") return {};
  if (client.source === "dynamic" && grant === "client_credentials") {
    const hash = client.metadata[REGISTERED_WITH_TOKEN];
    const token = typeof hash === "string" ? configuredToken(ctx, hash) : undefined;
    if (token) return { scopes: new Set(token.scopes) };
  }
  return undefined;
}

/**
 * The token endpoint's check, first in each grant without a user: the allowance, or
 * `unauthorized_client` (RFC 6749 §5.2: "not authorized to use this authorization grant type"),
 * audited so an operator sees who tried.
 */
export function requireGrantWithoutUser(
  ctx: ServerContext,
  client: ClientRecord,
  grant: GrantWithoutUser,
): GrantWithoutUserAllowance {
  const allowance = grantWithoutUserAllowance(ctx, client, grant);
  if (allowance) return allowance;
  ctx.audit?.({
    type: "grant_without_user_refused",
    client_id: client.clientId,
    grant_type: grant,
    client_source: client.source,
  });
  throw new OAuthError("unauthorized_client", {
    description: "a client that registered itself gets no grant without a user",
  });
}
