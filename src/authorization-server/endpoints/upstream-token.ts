/**
 * The upstream token endpoint (`POST <issuer>/upstream/token`): where a resource server gets the
 * upstream provider's access token of the user behind a request it accepted, so it can call the
 * provider's API as that user without forwarding the token its client sent (the spec's "MUST NOT
 * pass through"). docs/authorization-server.md "Upstream tokens for resource servers" has the
 * trust model; in short, the caller proves two things:
 *
 * - who it is: a pre-registered confidential client authenticating as at introspection (RFC 7662
 *   §2.1 asks the same of a party learning about tokens), listed in the provider's
 *   `keepTokens.resourceServers`;
 * - whom it acts for: `subject_token`, an access token this server issued for the resource that
 *   client serves, still active (signature, expiry, not revoked, its grant live). The upstream
 *   tokens handed out are that grant's, and no other.
 *
 * Form parameters: `subject_token`, `provider` (a provider id). The answer carries the upstream
 * `access_token`, `token_type` Bearer, `expires_in` when known, and `scope` when the provider said.
 */
import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE } from "../../shared/http.js";
import { authenticateClient } from "../clients/authentication.js";
import type { Endpoint, ServerContext } from "../core/context.js";
import { UPSTREAM_TOKEN_PATH } from "../core/paths.js";
import { readForm } from "../core/request-body.js";
import { activeAccessToken } from "../grants/active-access-token.js";
import { required } from "../grants/common.js";
import { currentUpstreamToken, UpstreamTokenUnavailable } from "../vault/upstream-tokens.js";

/** A subject token longer than this is no access token of ours; it is refused before any work. */
const MAX_SUBJECT_TOKEN_LENGTH = 8192;

function refusedSubject(description: string): OAuthError {
  // RFC 8693 §2.2.2 words it so for an unacceptable subject token; the same judgement here.
  return new OAuthError("invalid_request", { description });
}

/**
 * The grant behind an access token of this server, when the token is active: the same judgement
 * as introspection (signature with a published key, `typ`, `iss`, `exp`, its grant live, its jti
 * not revoked).
 */
async function activeSubject(ctx: ServerContext, token: string) {
  const claims =
    token.length <= MAX_SUBJECT_TOKEN_LENGTH ? await ctx.keys.verifyAccessToken(token) : undefined;
  if (!claims) throw refusedSubject("subject_token is not a valid access token of this server");
  // Its grant live and its jti not revoked (grants/active-access-token.ts): no row per token.
  const active = await activeAccessToken(ctx, claims.jti);
  if (!active || active.grant.userId === undefined) throw refusedSubject("subject_token is not active");
  return { audience: claims.aud, grant: active.grant };
}

export const handleUpstreamToken: Endpoint = async (request, ctx) => {
  const form = await readForm(request);
  const { client, method } = await authenticateClient(
    request,
    form,
    ctx,
    `${ctx.options.issuer.replace(/\/$/, "")}${UPSTREAM_TOKEN_PATH}`,
  );
  if (method === "none" || client.source !== "preregistered") {
    throw new OAuthError("invalid_client", {
      description: "upstream tokens are given only to configured confidential clients",
    });
  }
  const settings = ctx.options.upstreamSignIn;
  const providerId = required(form, "provider");
  const provider = settings?.providers.find((p) => p.id === providerId);
  // One answer for an unknown provider, one that keeps no tokens, and a client it does not list:
  // a caller learns nothing about the configuration it is not part of.
  const served = provider?.keepTokens?.resourceServers.filter((r) => r.clientId === client.clientId) ?? [];
  if (!settings || !provider || served.length === 0) {
    throw new OAuthError("unauthorized_client", {
      description: "this client may not receive upstream tokens of that provider",
    });
  }
  const subject = await activeSubject(ctx, required(form, "subject_token"));
  // The subject token must have been sent to this client's resource: a resource server acts only
  // for the users whose requests it received (the confused-deputy rule, as for token exchange).
  if (!served.some((r) => r.resource === subject.audience)) {
    throw refusedSubject("subject_token was not issued for a resource this client serves");
  }
  let set: Awaited<ReturnType<typeof currentUpstreamToken>>;
  try {
    set = await currentUpstreamToken(ctx, settings, provider, subject.grant.grantId);
  } catch (error) {
    if (!(error instanceof UpstreamTokenUnavailable)) throw error;
    ctx.log.info("upstream_token_unavailable", {
      upstream_provider: provider.id,
      client_id: client.clientId,
      grant_id: subject.grant.grantId,
      reason: error.reason,
    });
    // `invalid_grant`: what stands behind the subject token (its upstream tokens) is gone, and only
    // the user signing in through the provider again brings it back.
    if (error.reason === "reauthenticate") {
      throw new OAuthError("invalid_grant", {
        description: `upstream re-authentication required: ${error.message}`,
      });
    }
    throw new OAuthError("temporarily_unavailable", { description: error.message });
  }
  ctx.audit?.({
    type: "upstream_token_issued",
    upstream_provider: provider.id,
    client_id: client.clientId,
    grant_id: subject.grant.grantId,
  });
  const expiresIn =
    set.expiresAt === undefined ? undefined : Math.max(0, Math.floor((set.expiresAt - ctx.now()) / 1000));
  return jsonResponse(
    {
      access_token: set.accessToken,
      token_type: "Bearer",
      ...(expiresIn === undefined ? {} : { expires_in: expiresIn }),
      ...(set.scope === undefined ? {} : { scope: set.scope }),
    },
    { headers: NO_STORE },
  );
};
