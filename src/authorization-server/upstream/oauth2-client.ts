/**
 * The plain OAuth 2 side of an upstream sign-in, GitHub style: no ID token, so who signed in is
 * asked of the user-info endpoint with the access token; verified e-mail addresses and
 * organisations come from their own endpoints when configured.
 */
import { GuardedFetchError } from "../../shared/guarded-fetch.js";
import type {
  ResolvedOAuth2Provider,
  ResolvedUpstreamSignIn,
  UpstreamProfile,
} from "../core/upstream-options.js";
import { failed, UpstreamFailure } from "./failure.js";
import { upstreamRequest } from "./http.js";
import { exchangeCode, type UpstreamTokenResponse } from "./token-request.js";

/** GitHub's REST media type first; any JSON answer is read. */
const JSON_ACCEPT = "application/vnd.github+json, application/json";
/** Entries read from a list endpoint (e-mails, organisations); the rest is ignored. */
const MAX_LIST_ENTRIES = 200;

/** GETs a JSON document with the user's access token; a failure is the provider's (unreachable). */
async function getJson(
  url: string,
  accessToken: string,
  provider: ResolvedOAuth2Provider,
  settings: ResolvedUpstreamSignIn,
): Promise<unknown | UpstreamFailure> {
  try {
    const response = await upstreamRequest(url, {
      method: "GET",
      headers: { accept: JSON_ACCEPT, authorization: `Bearer ${accessToken}` },
      timeoutMs: settings.timeoutMs,
      ...provider.network,
    });
    if (response.status !== 200)
      return failed("unreachable", `${new URL(url).pathname}: HTTP ${response.status}`);
    return JSON.parse(response.body) as unknown;
  } catch (error) {
    return failed(
      "unreachable",
      `${new URL(url).pathname}: ${error instanceof GuardedFetchError ? error.code : "not JSON"}`,
    );
  }
}

function text(value: unknown, max = 320): string | undefined {
  return typeof value === "string" && value !== "" && value.length <= max ? value : undefined;
}

/**
 * The user's id: GitHub's numeric `id` (stable, unlike the login, which its owner may change and
 * someone else may then take), or a string `id`/`sub` from another provider of this kind.
 */
function subjectOf(user: Record<string, unknown>): string | undefined {
  const id = user.id ?? user.sub;
  if (typeof id === "number" && Number.isSafeInteger(id) && id >= 0) return String(id);
  return text(id, 255);
}

/** The primary address if verified, else the first verified one (GitHub's `/user/emails`). */
function verifiedEmail(list: unknown): string | undefined {
  if (!Array.isArray(list)) return undefined;
  const entries = list
    .slice(0, MAX_LIST_ENTRIES)
    .filter(
      (e): e is { email: string; verified: true; primary?: unknown } =>
        typeof e === "object" &&
        e !== null &&
        (e as { verified?: unknown }).verified === true &&
        text((e as { email?: unknown }).email) !== undefined,
    );
  return (entries.find((e) => e.primary === true) ?? entries[0])?.email;
}

/**
 * Completes a plain OAuth 2 sign-in: redeems the code, reads the user (and their verified e-mail and
 * organisations when configured) and returns the profile with the token response.
 */
export async function completeOAuth2SignIn(
  provider: ResolvedOAuth2Provider,
  settings: ResolvedUpstreamSignIn,
  params: { code: string; redirectUri: string; codeVerifier: string },
): Promise<{ profile: UpstreamProfile; tokens: UpstreamTokenResponse } | UpstreamFailure> {
  const tokens = await exchangeCode(provider, settings, provider.tokenEndpoint, params);
  if (tokens instanceof UpstreamFailure) return tokens;
  const user = await getJson(provider.userInfoEndpoint, tokens.access_token, provider, settings);
  if (user instanceof UpstreamFailure) return user;
  if (typeof user !== "object" || user === null || Array.isArray(user))
    return failed("profile_invalid", "user-info is not an object");
  const claims = user as Record<string, unknown>;
  const subject = subjectOf(claims);
  if (subject === undefined) return failed("profile_invalid", "user-info has no id");
  let email: string | undefined;
  if (provider.emailsEndpoint !== undefined) {
    const emails = await getJson(provider.emailsEndpoint, tokens.access_token, provider, settings);
    if (emails instanceof UpstreamFailure) return emails;
    email = verifiedEmail(emails);
  }
  let organizations: string[] | undefined;
  if (provider.organizationsEndpoint !== undefined) {
    const orgs = await getJson(provider.organizationsEndpoint, tokens.access_token, provider, settings);
    if (orgs instanceof UpstreamFailure) return orgs;
    organizations = Array.isArray(orgs)
      ? orgs
          .slice(0, MAX_LIST_ENTRIES)
          .map((o) => text((o as { login?: unknown } | null)?.login, 39))
          .filter((o): o is string => o !== undefined)
          .map((o) => o.toLowerCase())
      : [];
  }
  // Without an e-mail endpoint, `email_verified` of a user-info document counts (OpenID-like
  // providers of this kind); GitHub's public `email` on `/user` never counts as verified.
  if (email === undefined && provider.emailsEndpoint === undefined && claims.email_verified === true) {
    email = text(claims.email);
  }
  const name = text(claims.name, 200);
  const username = text(claims.login, 200) ?? text(claims.preferred_username, 200);
  return {
    profile: {
      provider: provider.id,
      subject,
      ...(email === undefined ? {} : { email }),
      emailVerified: email !== undefined,
      ...(name === undefined ? {} : { name }),
      ...(username === undefined ? {} : { username }),
      ...(organizations === undefined ? {} : { organizations }),
      claims,
    },
    tokens,
  };
}
