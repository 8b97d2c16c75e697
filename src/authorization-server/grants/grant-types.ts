/**
 * The grant types of the token endpoint (OAuth 2.1 §4), in one table: it dispatches `grant_type`
 * (endpoints/token.ts) and lists `grant_types_supported` in the metadata (RFC 8414 §2), so the two
 * cannot disagree.
 */
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { DEVICE_CODE_GRANT_TYPE, JWT_BEARER_GRANT } from "../policy/grants.js";
import { authorizationCodeGrant } from "./authorization-code.js";
import { clientCredentialsGrant } from "./client-credentials.js";
import { deviceCodeGrant } from "./device-code.js";
import type { TokenRequestDPoP } from "./dpop-binding.js";
import { jwtBearerEnabled, jwtBearerGrant } from "./jwt-bearer.js";
import { refreshTokenGrant } from "./refresh-token.js";
import { TOKEN_EXCHANGE_GRANT, tokenExchangeGrant } from "./token-exchange.js";

/**
 * Answers a token request of one grant type, for an authenticated client (OAuth 2.1 §3.2.3).
 * `dpop` is what the request's DPoP proof showed (already verified, grants/dpop-binding.ts): a
 * handler that binds passes `dpop.jkt` to signAccessToken and tokenResponse; one that ignores it
 * issues Bearer tokens, which RFC 9449 §5 allows.
 */
export type GrantHandler = (
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP,
) => Promise<Response>;

interface GrantType {
  name: string;
  handler: GrantHandler;
  /** Whether this server's configuration offers it. */
  enabled(ctx: ServerContext): boolean;
}

/** In the order `grant_types_supported` lists them. */
const GRANT_TYPES: readonly GrantType[] = [
  { name: "authorization_code", handler: authorizationCodeGrant, enabled: () => true },
  { name: "refresh_token", handler: refreshTokenGrant, enabled: (ctx) => ctx.options.refresh.enabled },
  { name: "client_credentials", handler: clientCredentialsGrant, enabled: () => true },
  {
    name: DEVICE_CODE_GRANT_TYPE,
    handler: deviceCodeGrant,
    enabled: (ctx) => ctx.options.deviceAuthorization?.enabled === true,
  },
  // RFC 8693: only with at least one configured policy (docs/authorization-server.md "Token exchange").
  { name: TOKEN_EXCHANGE_GRANT, handler: tokenExchangeGrant, enabled: (ctx) => !!ctx.options.tokenExchange },
  // RFC 7523: ID-JAG or workload identity, when either has a trusted issuer.
  { name: JWT_BEARER_GRANT, handler: jwtBearerGrant, enabled: jwtBearerEnabled },
];

/** The grant types this server's configuration allows (OAuth 2.1 §4). */
export function supportedGrantTypes(ctx: ServerContext): string[] {
  return GRANT_TYPES.filter((grant) => grant.enabled(ctx)).map((grant) => grant.name);
}

/** The handler of `grantType`, or undefined when this server does not offer it. */
export function grantHandler(ctx: ServerContext, grantType: string): GrantHandler | undefined {
  const grant = GRANT_TYPES.find((g) => g.name === grantType);
  return grant?.enabled(ctx) ? grant.handler : undefined;
}
