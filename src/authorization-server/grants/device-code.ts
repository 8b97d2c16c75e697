/**
 * `grant_type=urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4, §3.5): a device polls
 * with its device code until the user has answered at the verification page, then receives the
 * same tokens the authorization code grant issues.
 */
import { sha256Base64url } from "../../shared/crypto.js";
import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord, DeviceAuthorizationRecord, IssuedTokens } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { refuseGrantOfDisabledUser } from "../core/user-accounts.js";
import { DEVICE_CODE_GRANT_TYPE } from "../policy/grants.js";
import { approvedGrantResponse, drawTokens, tokensToWrite } from "./approved-grant.js";
import { required } from "./common.js";
import { codeDPoPProblem, grantDPoPBinding, type TokenRequestDPoP } from "./dpop-binding.js";

/** Device codes are 256 random bits, base64url (endpoints/device-authorization.ts). */
const DEVICE_CODE = /^[A-Za-z0-9_-]{43}$/;

/** RFC 8628 §3.5 answers while there is nothing to issue: always 400 (RFC 6749 §5.2). */
function pollError(
  code: "authorization_pending" | "slow_down" | "access_denied" | "expired_token" | "invalid_grant",
  description: string,
  detail?: string,
): OAuthError {
  return new OAuthError(code, { status: 400, description, ...(detail === undefined ? {} : { detail }) });
}

/**
 * Whether this authorization may be redeemed by `client`: the device code is bound to the client
 * that asked for it (RFC 8628 §3.4 "client_id ... REQUIRED if the client is not authenticating";
 * RFC 6749 §4.1.3 applied to the device code). Checked inside the store's transaction; a refusal
 * consumes the authorization, as any redemption attempt of an authorization code does.
 */
function boundToClient(client: ClientRecord, record: DeviceAuthorizationRecord): OAuthError | undefined {
  if (record.clientId === client.clientId) return undefined;
  return pollError("invalid_grant", "device code is invalid", "device code was issued to another client");
}

/**
 * `grant_type=urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4). One atomic poll of
 * the store decides the answer (§3.5): `authorization_pending` until the user answers,
 * `slow_down` to a device that polls faster than its interval (which then grows by 5 seconds),
 * `access_denied` after a denial, `expired_token` after `expires_in`, and `invalid_grant` for an
 * unknown code or a second redemption. An approval issues what the code flow issues: the same
 * access-token claims (RFC 9068), a refresh token under the same policy (refresh-policy.ts), and
 * the retirement of grants the new one supersedes. With a DPoP proof the tokens are bound to its
 * key exactly as the code flow binds them (RFC 9449 §5).
 */
export async function deviceCodeGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP = {},
): Promise<Response> {
  const deviceCode = required(form, "device_code");
  const invalid = (detail: string) => pollError("invalid_grant", "device code is invalid", detail);
  if (!DEVICE_CODE.test(deviceCode)) throw invalid("malformed device code");

  // Drawn before the transaction; written only when the approval allows refresh (refresh-policy.ts).
  const drawn = drawTokens(ctx);
  // RFC 9449 §5: a public client's refresh tokens are bound to the proof's key.
  const bindGrantTo = grantDPoPBinding(client, dpop);
  const result = await ctx.store.pollDeviceAuthorization(
    sha256Base64url(deviceCode),
    client.clientId,
    drawn.now,
    (record): IssuedTokens | OAuthError =>
      // RFC 9449 §10 applied to a device authorization bound to a key: only a proof of that key.
      boundToClient(client, record) ??
      codeDPoPProblem(record.dpopJkt, dpop) ??
      tokensToWrite(ctx, drawn, record.grantId, record.approvedScopes ?? record.scopes, bindGrantTo),
  );
  switch (result.status) {
    case "issued":
      break;
    case "refused":
      throw result.error;
    case "pending":
      throw pollError("authorization_pending", "the user has not answered yet");
    case "slow_down":
      throw pollError("slow_down", "polling too often: wait 5 seconds longer between requests");
    case "denied":
      throw pollError("access_denied", "the user denied the request");
    case "expired":
      throw pollError("expired_token", "the device code has expired; start again");
    case "consumed":
      ctx.audit?.({ type: "device_code_replayed", client_id: client.clientId });
      throw invalid("device code already redeemed");
    default:
      throw invalid("unknown device code");
  }
  // An account disabled since it approved gets nothing (issue 26): disabling denies an approval not
  // yet redeemed, and a poll that committed meanwhile reads the account here (user-accounts.ts).
  if (await refuseGrantOfDisabledUser(ctx.store, result.grant.grantId, result.grant.userId, drawn.now)) {
    throw pollError("access_denied", "the authorization was withdrawn", "the user's account is disabled");
  }
  return approvedGrantResponse(ctx, client, result, drawn, DEVICE_CODE_GRANT_TYPE, dpop.jkt);
}
