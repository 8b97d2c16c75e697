/** Rules about the full flow run with `--login` (evaluated only when it ran). */
import { fail, info, pass, type Rule, skip, warn } from "./rule-helpers.js";

export const LOGIN_RULES: readonly Rule[] = [
  // ── Login flow (--login) ───────────────────────────────────────────────────────────────────
  {
    id: "login.flow",
    group: "login",
    level: "MUST",
    spec: 'Spec "Authorization flow" 1-8 (discovery, registration, PKCE, resource, iss, token request)',
    title: "A client following the spec obtains a token",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return fail(`the flow stopped: ${login.error ?? "unknown reason"}`);
      const how = login.clientSource ? ` as a ${login.clientSource} client` : "";
      return pass(`token from ${login.issuer}${how}${login.scope ? ` with scope "${login.scope}"` : ""}`);
    },
  },
  {
    id: "login.token-accepted",
    group: "login",
    level: "MUST",
    spec: 'Spec "Authorization flow" 9; "Token validation by the resource server" 1-3',
    title: "The resource accepts the token it led the client to",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      if (login.resourceError) return fail(login.resourceError);
      const status = login.resourceStatus;
      const upgrades = login.stepUps ? ` after ${login.stepUps} scope upgrade(s)` : "";
      if (status !== undefined && status >= 200 && status < 300) return pass(`${status}${upgrades}`);
      return fail(`HTTP ${status}${upgrades}`);
    },
  },
  {
    id: "login.step-up",
    group: "login",
    level: "MAY",
    spec: 'Spec "Insufficient scope at run time" and "Client handling (scope upgrade)"',
    title: "Scope upgrades during the flow",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      return login.stepUps
        ? pass(`the resource asked for more scope ${login.stepUps} time(s) and the upgrade worked`)
        : info("the audited request needed no scope upgrade");
    },
  },
  {
    id: "login.token-lifetime",
    group: "login",
    level: "SHOULD",
    spec: 'Spec "Token theft and communication security" 2 and "Limits" 2 (short-lived access tokens)',
    title: "Access tokens are short-lived",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      const lifetime = login.accessTokenLifetimeSeconds;
      if (lifetime === undefined) return info("the token response has no expires_in");
      return lifetime <= 3600 ? pass(`${lifetime} s`) : warn(`${lifetime} s (more than an hour)`);
    },
  },
  {
    id: "login.refresh",
    group: "login",
    level: "MUST",
    spec: 'OAuth 2.1 §4.3 (a refresh token issued can be used); spec "Refresh tokens (2026-07-28)"',
    title: "A refresh token, when issued, yields a new access token",
    check(o) {
      const login = o.login!;
      if (!login.tokenObtained) return skip("no token");
      if (!login.refreshTokenIssued) return skip("no refresh token issued (the client MUST NOT assume one)");
      return login.refreshWorked
        ? pass("refreshed")
        : fail(`refresh failed: ${login.refreshError ?? "no new token"}`);
    },
  },
  {
    id: "login.refresh-rotation",
    group: "login",
    level: "MUST",
    spec: 'Spec "Token theft and communication security" 2 (rotate refresh tokens for public clients); OAuth 2.1 §4.3.1',
    title: "Refresh tokens of a public client rotate",
    check(o) {
      const login = o.login!;
      if (!login.refreshWorked) return skip("no refresh to inspect");
      if (login.publicClient === false) return skip("the client is confidential: rotation is not required");
      return login.refreshRotated
        ? pass("a new refresh token on every use")
        : fail("the same refresh token came back");
    },
  },
];
