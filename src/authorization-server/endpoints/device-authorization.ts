/**
 * The device authorization endpoint (RFC 8628 §3.1, §3.2): a device without a usable browser asks
 * for a device code to poll with and a user code for its user to type at the verification page.
 */
import { randomToken, sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import { jsonResponse, NO_STORE } from "../../shared/http.js";
import { StorageConflictError } from "../../storage/contract.js";
import { authenticateClient } from "../clients/authentication.js";
import type { Endpoint } from "../core/context.js";
import { newSortableId } from "../core/ids.js";
import { endpointUrl } from "../core/paths.js";
import { clientRateLimitKey, enforceTokenRateLimit } from "../core/rate-limit.js";
import { readForm } from "../core/request-body.js";
import { newUserCode, normalizeUserCode, userCodeHash } from "../grants/user-code.js";
import { DEVICE_CODE_GRANT_TYPE, mayUseGrantType } from "../policy/grants.js";
import { resolveResource, resolveScopes } from "./authorize.js";

/** New user codes tried before giving up when the drawn one is taken (it practically never is). */
const USER_CODE_ATTEMPTS = 5;

/** The device authorization settings in force, or undefined when the grant is off. */
export function deviceAuthorizationSettings(options: {
  deviceAuthorization?: { enabled: boolean; ttlSeconds: number; intervalSeconds: number };
}): { ttlSeconds: number; intervalSeconds: number } | undefined {
  const settings = options.deviceAuthorization;
  return settings?.enabled ? settings : undefined;
}

/**
 * The device authorization endpoint (RFC 8628 §3.1): form body, client authentication exactly as
 * at the token endpoint (§3.1: "the client MUST authenticate" when it has credentials; a public
 * client names itself with `client_id`), a client registered for the device_code grant, then
 * `resource` and `scope` judged by the same functions as `/authorize` (RFC 8707 §2; the client's
 * registered scope ceiling). Answers with the codes and where to use them (§3.2), `no-store`.
 *
 * The device code carries 256 random bits (§5.2: guessing it must be infeasible); both codes are
 * stored only as SHA-256 hashes.
 */
export const handleDeviceAuthorization: Endpoint = async (request, ctx, info) => {
  const settings = deviceAuthorizationSettings(ctx.options);
  if (!settings) throw new OAuthError("invalid_request", { status: 404, description: "no such endpoint" });
  // The token endpoint's per-address budget, shared: a device's whole conversation (this request and
  // its polls) counts against one limit, before any client authentication is attempted.
  const address = clientRateLimitKey(info);
  await enforceTokenRateLimit(
    ctx,
    {
      kind: "address",
      key: `addr:${address}`,
      perMinute: ctx.options.tokenRateLimit?.perAddressPerMinute ?? 0,
    },
    { address },
  );
  const form = await readForm(request);
  const issuer = ctx.options.issuer;
  const { client } = await authenticateClient(request, form, ctx, endpointUrl(issuer, "deviceAuthorization"));
  // RFC 8628 §3.2 / RFC 6749 §5.2 unauthorized_client: the client did not register this grant.
  if (!mayUseGrantType(client, DEVICE_CODE_GRANT_TYPE)) {
    throw new OAuthError("unauthorized_client", {
      description: "client is not allowed to use the device authorization grant",
    });
  }
  const resources = form.get("resource") === undefined ? [] : [form.get("resource")!];
  const resource = resolveResource(ctx, resources);
  const scopes = resolveScopes(ctx, client, resource, form.get("scope"));

  const deviceCode = randomToken(32);
  const now = ctx.now();
  const expiresAt = now + settings.ttlSeconds * 1000;
  let userCode: string | undefined;
  for (let attempt = 0; attempt < USER_CODE_ATTEMPTS && userCode === undefined; attempt++) {
    const candidate = newUserCode();
    try {
      await ctx.store.createDeviceAuthorization({
        deviceCodeHash: sha256Base64url(deviceCode),
        userCodeHash: userCodeHash(normalizeUserCode(candidate)!),
        clientId: client.clientId,
        scopes,
        resource,
        interval: settings.intervalSeconds,
        createdAt: now,
        expiresAt,
        status: "pending",
        grantId: newSortableId(),
      });
      userCode = candidate;
    } catch (error) {
      // Another pending authorization holds this user code: draw again.
      if (!(error instanceof StorageConflictError)) throw error;
    }
  }
  if (userCode === undefined) {
    throw new OAuthError("temporarily_unavailable", {
      description: "could not allocate a user code; retry shortly",
      detail: "user code collisions on every attempt",
    });
  }
  ctx.log.info("device_authorization_started", { client_id: client.clientId, scopes: scopes.join(" ") });
  const verificationUri = endpointUrl(issuer, "device");
  return jsonResponse(
    {
      device_code: deviceCode,
      user_code: userCode,
      verification_uri: verificationUri,
      // RFC 8628 §3.3.1: for a QR code or a link; the page still asks the user to confirm (§5.4).
      verification_uri_complete: `${verificationUri}?${new URLSearchParams({ user_code: userCode })}`,
      expires_in: settings.ttlSeconds,
      interval: settings.intervalSeconds,
    },
    { headers: NO_STORE },
  );
};
