/**
 * The authorization flow's orchestration (spec "Authorization flow" 1-9): discovery, scope
 * selection (initial or step-up), the DPoP decision, the grant (a configured `GrantProvider`, the
 * device authorization grant, or the interactive code flow), then storing the tokens. Single-flight per resource and challenge.
 * Internal to the client.
 */

import { wantsDPoP } from "../protocol/dpop.js";
import { scopeForTenant } from "../protocol/issuer-compat.js";
import {
  type BearerChallenge,
  selectInitialScope,
  selectStepUpScope,
  splitScope,
  withOfflineAccess,
} from "../protocol/step-up.js";
import { type StoredTokens, tokensKey } from "../stores/types.js";
import { authorizationCode } from "./authorization-code.js";
import { deviceAuthorization } from "./device-authorization.js";
import { revokeSuperseded } from "./logout.js";
import { discoverForResource } from "./resource-discovery.js";
import { type AuthState, dpopFor, issuedTokens } from "./state.js";

/** How to authorize: `previousScopes` makes it a step-up; `fresh` ignores cached metadata. */
export interface AuthorizeOptions {
  previousScopes?: string[];
  fresh: boolean;
}

/** Authorizes for `serverUrl`; concurrent callers with the same resource and challenge share one flow. */
export function authorize(
  state: AuthState,
  serverUrl: string,
  challenge: BearerChallenge,
  options: AuthorizeOptions,
): Promise<StoredTokens> {
  const key = `${options.previousScopes ? "step-up" : "auth"} ${new URL(serverUrl).origin}${new URL(serverUrl).pathname} ${challenge.scope ?? ""}`;
  return state.authorizeFlight.run(key, () => runAuthorization(state, serverUrl, challenge, options));
}

async function runAuthorization(
  state: AuthState,
  serverUrl: string,
  challenge: BearerChallenge,
  options: AuthorizeOptions,
): Promise<StoredTokens> {
  const config = state.options;
  // Steps 1-2: protected resource metadata, then the authorization server.
  const { resource, server } = await discoverForResource(state, serverUrl, challenge, options.fresh);
  const metadata = server.metadata;
  const resourceValue = resource.metadata.resource;

  // Step 5: scope by the spec's priority, or the upgrade strategy.
  let scopes = options.previousScopes
    ? selectStepUpScope(state.strategy, options.previousScopes, splitScope(challenge.scope))
    : selectInitialScope(challenge.scope, resource.metadata.scopes_supported);
  scopes = withOfflineAccess(
    scopes,
    metadata.scopes_supported,
    config.offlineAccess !== false && !config.grant,
  );
  // A templated issuer's tenant is proven by an ID token, so `openid` is asked for there alone.
  if (!config.grant) scopes = scopeForTenant(config.issuerCompatibility, metadata.issuer, scopes);
  const scope = scopes.length ? scopes.join(" ") : undefined;
  config.onEvent?.({
    type: "authorization_started",
    resource: resourceValue,
    issuer: metadata.issuer,
    scope,
    stepUp: options.previousScopes !== undefined,
  });

  const dpopWanted = wantsDPoP(config.dpop ?? "auto", metadata, {
    offersDPoP: challenge.dpopOffered === true || challenge.scheme.toLowerCase() === "dpop",
    boundTokensRequired: resource.metadata.dpop_bound_access_tokens_required === true,
    ...(resource.metadata.dpop_signing_alg_values_supported && {
      algorithms: resource.metadata.dpop_signing_alg_values_supported,
    }),
  });
  let tokens: StoredTokens;
  if (config.grant) {
    const result = await config.grant({
      metadata,
      resource: resourceValue,
      scope,
      fetch: state.fetch,
      ...(dpopWanted && {
        dpop: async (clientId: string) => {
          const signer = await dpopFor(state, metadata.issuer, clientId, true);
          if (!signer) throw new Error("unreachable: a DPoP key is created on demand");
          return signer;
        },
      }),
    });
    state.clients.set(metadata.issuer, result.client);
    state.keys.set(metadata.issuer, result.keys);
    tokens = await issuedTokens(
      result.response,
      {
        issuer: metadata.issuer,
        client_id: result.client.client_id,
        resource: resourceValue,
        requestedScope: scope,
      },
      dpopWanted ? await dpopFor(state, metadata.issuer, result.client.client_id, false) : undefined,
    );
  } else if (config.deviceAuthorization) {
    tokens = await deviceAuthorization(
      state,
      config.deviceAuthorization,
      server,
      resourceValue,
      scope,
      dpopWanted,
    );
  } else {
    // A step-up names what the resource asked for beyond the stored scopes (for a session that
    // cannot open a browser to say so).
    const missingScopes = options.previousScopes
      ? splitScope(challenge.scope).filter((s) => !options.previousScopes!.includes(s))
      : undefined;
    tokens = await authorizationCode(state, server, resourceValue, scope, dpopWanted, missingScopes);
  }
  const key = tokensKey(tokens.issuer, tokens.client_id, tokens.resource);
  const previous = await state.store.get("tokens", key);
  await state.store.set("tokens", key, tokens);
  if (
    options.previousScopes !== undefined &&
    config.revokeSupersededRefreshTokens === true &&
    previous?.refresh_token !== undefined &&
    tokens.refresh_token !== undefined &&
    previous.refresh_token !== tokens.refresh_token
  ) {
    // RFC 7009 §1: a token the client no longer needs is revoked, so a step-up does not leave
    // a second live grant behind. Only after the new tokens are stored.
    revokeSuperseded(state, previous, metadata);
  }
  config.onEvent?.({
    type: "authorized",
    resource: resourceValue,
    issuer: metadata.issuer,
    scope: tokens.scope,
  });
  return tokens;
}
