/**
 * The interactive authorization code grant (authorization flow steps 4-7): registration, the
 * authorization request with PKCE, the user agent, the callback checks and the token request.
 * Internal to the client.
 */

import { AuthorizationFlowError } from "../errors.js";
import {
  assertOpenableAuthorizationUrl,
  createAuthorizationRequest,
  validateAuthorizationResponse,
} from "../protocol/authorization.js";
import { assertTenant, resourceParameter } from "../protocol/issuer-compat.js";
import { resolveClient } from "../protocol/registration.js";
import { exchangeAuthorizationCode } from "../protocol/tokens.js";
import type { StoredServer, StoredTokens } from "../stores/types.js";
import {
  type AuthState,
  compatibilityReporter,
  dpopFor,
  issuedTokens,
  keysFor,
  preregisteredClients,
} from "./state.js";

/** Tokens for `resource` through the user agent; fails with `no_interactive_authorization` without one. */
export async function authorizationCode(
  state: AuthState,
  server: StoredServer,
  resource: string,
  scope: string | undefined,
  dpopWanted: boolean,
  missingScopes?: string[],
): Promise<StoredTokens> {
  if (!state.session) {
    throw new AuthorizationFlowError(
      "no_interactive_authorization",
      "authorization is required but no user agent is configured (pass userAgent + redirectUri, authorizationSession, or deviceAuthorization)",
      { kind: "action", step: "user agent" },
    );
  }
  const options = state.options;
  const { metadata } = server;
  const session = await state.session({ resource, scope, ...(missingScopes && { missingScopes }) });
  try {
    // Step 4: registration, bound to this issuer.
    const known = await state.store.get("client", metadata.issuer);
    const client = await resolveClient({
      issuer: metadata.issuer,
      metadata,
      store: state.store,
      fetch: state.fetch,
      redirectUri: session.redirectUri,
      ...(session.exactRedirectUri && { exactRedirectUri: true }),
      ...(preregisteredClients(state, metadata.issuer) && {
        preregistered: preregisteredClients(state, metadata.issuer)!,
      }),
      ...(options.clientMetadataUrl && { clientMetadataUrl: options.clientMetadataUrl }),
      ...(options.clientName && { clientName: options.clientName }),
      ...(options.registrationMetadata && {
        registrationMetadata: options.registrationMetadata,
      }),
    });
    if (known?.client_id !== client.client_id) {
      options.onEvent?.({ type: "registered", issuer: metadata.issuer, source: client.source });
    }
    state.clients.set(metadata.issuer, client);
    // Step 5: PKCE, resource, state, scope; the issuer is recorded in `pending` before opening.
    // The resource parameter as this issuer takes it (issuer-compat.ts; the value itself unless
    // an operator named the issuer); `pending` carries it on to the token request.
    const report = compatibilityReporter(state);
    const { url, pending } = await createAuthorizationRequest({
      metadata,
      client,
      redirectUri: session.redirectUri,
      resource: resourceParameter(
        options.issuerCompatibility,
        metadata.issuer,
        resource,
        "authorization and token requests",
        report,
      ),
      scope,
      ...(server.discovered_via && { discoveredVia: server.discovered_via }),
    });
    assertOpenableAuthorizationUrl(url);
    // Step 6: the user agent.
    let callback: string | URL;
    try {
      callback = await session.open(url, {
        issuer: pending.expectedIssuer,
        issParameterSupported: pending.issParameterSupported,
      });
    } catch (cause) {
      if (cause instanceof AuthorizationFlowError) throw cause;
      throw new AuthorizationFlowError("user_agent_failed", "the user agent did not return a callback", {
        kind: "action",
        step: "user agent",
        cause,
      });
    }
    // Step 7: state, then iss, then the token request with code_verifier and resource.
    const params = validateAuthorizationResponse(pending, metadata, callback);
    const dpop = dpopWanted ? await dpopFor(state, metadata.issuer, client.client_id, true) : undefined;
    const response = await exchangeAuthorizationCode(
      { metadata, client, fetch: state.fetch, ...keysFor(state, client), ...(dpop && { dpop }) },
      {
        callbackParameters: params,
        redirectUri: pending.redirectUri,
        codeVerifier: pending.codeVerifier,
        resource: pending.resource,
        scope,
      },
    );
    // A templated issuer's tenant is proven by the ID token (issuer-compat.ts `tenantIssuer`).
    assertTenant(options.issuerCompatibility, metadata.issuer, response, report);
    return await issuedTokens(
      response,
      { issuer: metadata.issuer, client_id: client.client_id, resource, requestedScope: scope },
      dpop,
    );
  } finally {
    await session.close?.();
  }
}
