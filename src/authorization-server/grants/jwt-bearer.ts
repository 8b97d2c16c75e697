/**
 * `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` (RFC 7523 §2.1). The assertion's JOSE
 * `typ` decides which use it is: `oauth-id-jag+jwt` is an identity assertion grant from an
 * enterprise identity provider (./id-jag.ts), anything else a workload's own JWT
 * (./workload-identity.ts). What both share is in ./jwt-assertion.ts.
 */
import { decodeJwt, decodeProtectedHeader } from "jose";
import { OAuthError } from "../../shared/errors.js";
import type { ClientRecord } from "../../storage/contract.js";
import type { ServerContext } from "../core/context.js";
import { required } from "./common.js";
import type { TokenRequestDPoP } from "./dpop-binding.js";
import { identityAssertionGrant } from "./id-jag.js";
import { ID_JAG_TYP, invalidAssertion } from "./jwt-assertion.js";
import { workloadIdentityGrant } from "./workload-identity.js";

/** Whether the JOSE `typ` names an ID-JAG (RFC 8725 §3.11; compared like jose's `typ` option). */
function isIdentityAssertion(assertion: string): boolean {
  let typ: unknown;
  try {
    typ = decodeProtectedHeader(assertion).typ;
  } catch {
    throw invalidAssertion("assertion is not a JWT");
  }
  if (typeof typ !== "string") return false;
  const normalized = typ.toLowerCase().replace(/^application\//, "");
  return normalized === ID_JAG_TYP;
}

/** Whether either use of the grant is configured (grants/grant-types.ts). */
export function jwtBearerEnabled(ctx: ServerContext): boolean {
  return ctx.options.enterpriseAuthorization !== undefined || ctx.options.workloadIdentity !== undefined;
}

/**
 * The JWT bearer grant (RFC 7523 §2.1): one `assertion`, routed by its `typ` to the use that is
 * configured for it. A refusal is audited (`assertion_refused`) with its reason, never the assertion.
 */
export async function jwtBearerGrant(
  ctx: ServerContext,
  client: ClientRecord,
  form: Map<string, string>,
  dpop: TokenRequestDPoP,
): Promise<Response> {
  const assertion = required(form, "assertion");
  try {
    if (isIdentityAssertion(assertion)) {
      if (!ctx.options.enterpriseAuthorization)
        throw invalidAssertion("identity assertions are not accepted");
      return await identityAssertionGrant(ctx, client, form, assertion, dpop);
    }
    if (!ctx.options.workloadIdentity) {
      throw invalidAssertion(`assertion must be an identity assertion (typ ${ID_JAG_TYP})`);
    }
    return await workloadIdentityGrant(ctx, client, form, assertion, dpop);
  } catch (error) {
    if (error instanceof OAuthError) {
      let issuer: unknown;
      try {
        issuer = decodeJwt(assertion).iss;
      } catch {}
      ctx.audit?.({
        type: "assertion_refused",
        client_id: client.clientId,
        error: error.code,
        reason: error.description ?? error.code,
        // Only an issuer this server trusts is worth naming; anything else is attacker text.
        ...(typeof issuer === "string" && trustedIssuerNames(ctx).has(issuer)
          ? { assertion_issuer: issuer }
          : {}),
      });
    }
    throw error;
  }
}

function trustedIssuerNames(ctx: ServerContext): Set<string> {
  return new Set([
    ...(ctx.options.enterpriseAuthorization?.identityProviders ?? []).map((p) => p.issuer),
    ...(ctx.options.workloadIdentity?.issuers ?? []).map((i) => i.issuer),
  ]);
}
