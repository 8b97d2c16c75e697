/**
 * What `/authorize` hands to the login and consent pages, and the final step back to the client:
 * the authorization response (OAuth 2.1 §4.1.2, RFC 9207).
 */

import { createHmac } from "node:crypto";
import { sha256Base64url, timingSafeEqualString } from "../../shared/crypto.js";
import type { OAuthErrorCode } from "../../shared/errors.js";
import type { ClientRecord, InteractionRecord } from "../../storage/contract.js";
import type { SealedCodeRecord, ServerContext } from "../core/context.js";
import { newSortableId } from "../core/ids.js";
import { randomToken } from "../core/random.js";
import { refreshAllowed } from "../grants/refresh-policy.js";
import { seeOther } from "./security-headers.js";

/** How long a user has to log in and decide (the interaction record's lifetime). */
export const INTERACTION_TTL_MS = 10 * 60 * 1000;

/** Interaction ids travel in URLs; 128 random bits, base64url. */
const INTERACTION_ID = /^[A-Za-z0-9_-]{22}$/;

export function isInteractionId(value: string | null | undefined): value is string {
  return typeof value === "string" && INTERACTION_ID.test(value);
}

export function newInteractionId(): string {
  return randomToken(16);
}

/**
 * The CSRF token of a form, derived from a browser secret (the binding cookie for an interaction,
 * the session cookie for the account page) and a purpose. It never needs storing in the clear: the
 * page recomputes it from the cookie the browser sends, the interaction keeps only its hash, and a
 * page on another site cannot compute it because it cannot read the cookie.
 */
export function csrfToken(browserSecret: string, purpose: string): string {
  return createHmac("sha256", browserSecret).update(`gatehouse-csrf\0${purpose}`).digest("base64url");
}

/** Constant-time check of a submitted CSRF token against the expected one. */
export function csrfMatches(submitted: string | undefined, expected: string): boolean {
  return submitted !== undefined && timingSafeEqualString(submitted, expected);
}

/** Constant-time check that a browser's binding cookie is the one the interaction was bound to. */
export function bindingMatches(bindingCookie: string | undefined, interaction: InteractionRecord): boolean {
  return (
    bindingCookie !== undefined &&
    timingSafeEqualString(sha256Base64url(bindingCookie), interaction.browserBindingHash)
  );
}

/**
 * `redirectUri` with the authorization response parameters added to its query (OAuth 2.1 §4.1.2:
 * the redirect URI's own query is kept). `iss` is always present (RFC 9207 §2, also on errors) and
 * `state` is echoed exactly as received.
 */
export function authorizationResponseUrl(
  redirectUri: string,
  ctx: Pick<ServerContext, "options">,
  params: { code?: string; error?: OAuthErrorCode; errorDescription?: string; state?: string | undefined },
): string {
  const query = new URLSearchParams();
  if (params.code !== undefined) query.append("code", params.code);
  if (params.error !== undefined) query.append("error", params.error);
  if (params.errorDescription !== undefined) query.append("error_description", params.errorDescription);
  if (params.state !== undefined) query.append("state", params.state);
  query.append("iss", ctx.options.issuer);
  // Append to the raw string rather than through `URL.searchParams`, which would re-encode the
  // client's own query (`%20` → `+`, `?flag` → `?flag=`). Redirect URIs never carry a fragment.
  const separator = !redirectUri.includes("?") ? "?" : /[?&]$/.test(redirectUri) ? "" : "&";
  return `${redirectUri}${separator}${query.toString()}`;
}

/** The pending request a code is issued for (an interaction, or a validated silent request). */
export type ApprovedRequest = Pick<
  InteractionRecord,
  | "clientId"
  | "redirectUri"
  | "redirectUriSent"
  | "scopes"
  | "resource"
  | "state"
  | "codeChallenge"
  | "codeChallengeMethod"
  // RFC 9449 §10: the `dpop_jkt` the code is bound to, kept by the interaction across the pages.
  | "dpopJkt"
>;

/**
 * Issues an authorization code (OAuth 2.1 §4.1.2), short-lived, bound to client, redirect URI, PKCE
 * challenge, resource and `dpop_jkt` if any: sealed (its record encrypted into the code, nothing
 * written until it is redeemed; grants/sealed-code.ts) when the server has a sealer, otherwise 256
 * random bits stored only as their SHA-256. Returns the 303 to the client's redirect URI with
 * `code`, `state` and `iss`. `session` is the sign-in that approved it: the grant remembers it, so
 * a step-up approved in the same sign-in supersedes it.
 */
export async function issueCodeAndRedirect(
  ctx: ServerContext,
  request: ApprovedRequest,
  client: ClientRecord,
  session: { userId: string; idHash: string },
  cookies: readonly string[] = [],
): Promise<Response> {
  const userId = session.userId;
  const now = ctx.now();
  const record: SealedCodeRecord = {
    grantId: newSortableId(),
    clientId: request.clientId,
    userId,
    redirectUri: request.redirectUri,
    redirectUriSent: request.redirectUriSent,
    scopes: [...request.scopes],
    resource: request.resource,
    codeChallenge: request.codeChallenge,
    codeChallengeMethod: request.codeChallengeMethod,
    refreshAllowed: refreshAllowed(ctx, client, request.scopes),
    sessionHash: session.idHash,
    ...(request.dpopJkt === undefined ? {} : { dpopJkt: request.dpopJkt }),
    createdAt: now,
    expiresAt: now + ctx.options.codeTtlSeconds * 1000,
  };
  let code: string;
  if (ctx.codeSealer) code = ctx.codeSealer.seal(record);
  else {
    code = randomToken(32);
    await ctx.store.insertAuthorizationCode({ ...record, codeHash: sha256Base64url(code) });
  }
  ctx.log.info("authorization_code_issued", {
    client_id: request.clientId,
    user_id: userId,
    scopes: request.scopes.join(" "),
  });
  return seeOther(
    authorizationResponseUrl(request.redirectUri, ctx, { code, state: request.state }),
    cookies,
  );
}

/** The path of an endpoint under the issuer, plus a query: page links stay on the issuer's origin. */
export function issuerPath(
  ctx: Pick<ServerContext, "options">,
  path: string,
  query?: Record<string, string>,
) {
  const base = new URL(ctx.options.issuer);
  const url = new URL(`${base.pathname.replace(/\/$/, "")}${path}`, base);
  for (const [k, v] of Object.entries(query ?? {})) url.searchParams.set(k, v);
  return `${url.pathname}${url.search}`;
}
