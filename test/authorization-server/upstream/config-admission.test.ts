/**
 * The upstream sign-in options, refused at start-up with a message naming the option; the presets'
 * settings; and the admission rules judged on profiles (e-mail domains only when verified and
 * matched exactly, organisations, Google hosted domain, Entra tenant, the `admit` callback).
 */
import { describe, expect, it } from "vitest";
import { resolveOptions } from "../../../src/authorization-server/config/resolve-options.js";
import type {
  ResolvedUpstreamProvider,
  UpstreamProfile,
  UpstreamProviderOptions,
} from "../../../src/authorization-server/core/upstream-options.js";
import { admissionFailure } from "../../../src/authorization-server/upstream/admission.js";
import { resolveUpstreamSignIn } from "../../../src/authorization-server/upstream/resolve.js";

const base = { issuer: "https://as.example" };

function resolve(...providers: Partial<UpstreamProviderOptions>[]) {
  return resolveOptions({ ...base, upstreamSignIn: { providers: providers as UpstreamProviderOptions[] } })
    .upstreamSignIn!;
}

function refused(providers: Partial<UpstreamProviderOptions>[], message: RegExp): void {
  expect(() => resolve(...providers)).toThrow(message);
}

describe("options", () => {
  it("the presets fill in issuers, endpoints and scopes", () => {
    const [github, google, entra, gitlab] = resolve(
      { id: "github", preset: "github", clientId: "c", clientSecret: "s" },
      { id: "google", preset: "google", clientId: "c", clientSecret: "s" },
      {
        id: "entra",
        preset: "microsoft",
        tenant: "contoso.onmicrosoft.com",
        clientId: "c",
        clientSecret: "s",
      },
      { id: "gitlab", preset: "gitlab", clientId: "c" },
    ).providers;
    expect(github).toMatchObject({
      kind: "oauth2",
      tokenEndpoint: "https://github.com/login/oauth/access_token",
      userInfoEndpoint: "https://api.github.com/user",
      tokenEndpointAuthMethod: "client_secret_post",
      scopes: ["read:user", "user:email"],
    });
    expect(github).not.toHaveProperty("organizationsEndpoint");
    expect(google).toMatchObject({
      kind: "oidc",
      issuer: "https://accounts.google.com",
      multiTenantIssuer: false,
    });
    expect(entra).toMatchObject({
      issuer: "https://login.microsoftonline.com/contoso.onmicrosoft.com/v2.0",
      multiTenantIssuer: false,
    });
    expect(gitlab).toMatchObject({ issuer: "https://gitlab.com", tokenEndpointAuthMethod: "none" });
  });

  it("an organisation rule asks GitHub for read:org and reads the organisations endpoint", () => {
    const [github] = resolve({
      id: "github",
      preset: "github",
      clientId: "c",
      clientSecret: "s",
      admission: { githubOrganizations: ["Gatehouse-Dev"] },
    }).providers;
    expect(github!.scopes).toContain("read:org");
    expect(github).toMatchObject({
      organizationsEndpoint: "https://api.github.com/user/orgs?per_page=100",
      admission: { githubOrganizations: ["gatehouse-dev"] },
    });
  });

  it("the multi-tenant Entra authorities are recognised", () => {
    for (const tenant of ["common", "organizations"]) {
      const [p] = resolve({
        id: "ms",
        preset: "microsoft",
        tenant,
        clientId: "c",
        clientSecret: "s",
      }).providers;
      expect(p).toMatchObject({ multiTenantIssuer: true });
    }
  });

  const cases: [string, Partial<UpstreamProviderOptions>[], RegExp][] = [
    [
      "an id that cannot name a path",
      [{ id: "../x", kind: "oidc", issuer: "https://idp.example", clientId: "c" }],
      /\.id must be/,
    ],
    ["an unknown preset", [{ id: "a", preset: "myspace" as never, clientId: "c" }], /preset must be one of/],
    ["no kind and no preset", [{ id: "a", clientId: "c" }], /kind must be "oidc" or "oauth2"/],
    [
      "a preset's kind contradicted",
      [{ id: "a", preset: "google", kind: "oauth2", clientId: "c" }],
      /kind must be "oidc"/,
    ],
    ["no client id", [{ id: "a", preset: "google" }], /clientId must be a non-empty string/],
    [
      "a secret method without a secret",
      [{ id: "a", preset: "google", clientId: "c", tokenEndpointAuthMethod: "client_secret_basic" }],
      /clientSecret is needed/,
    ],
    [
      "an http issuer",
      [{ id: "a", kind: "oidc", issuer: "http://idp.example", clientId: "c" }],
      /issuer: URL must/,
    ],
    [
      "an issuer required by the preset",
      [{ id: "a", preset: "okta", clientId: "c" }],
      /issuer is required for the okta preset/,
    ],
    [
      "endpoints given for OpenID Connect",
      [{ id: "a", preset: "google", clientId: "c", tokenEndpoint: "https://x.example/t" }],
      /taken from the issuer's discovery/,
    ],
    [
      "an HMAC algorithm",
      [{ id: "a", preset: "google", clientId: "c", algorithms: ["HS256"] }],
      /asymmetric JWS algorithms/,
    ],
    [
      "alg none",
      [{ id: "a", preset: "google", clientId: "c", algorithms: ["none"] }],
      /asymmetric JWS algorithms/,
    ],
    [
      "scopes without openid",
      [{ id: "a", preset: "google", clientId: "c", scopes: ["email"] }],
      /must include openid/,
    ],
    [
      "both tenant and issuer",
      [
        {
          id: "a",
          preset: "microsoft",
          tenant: "common",
          issuer: "https://login.microsoftonline.com/common/v2.0",
          clientId: "c",
        },
      ],
      /exactly one of tenant and issuer/,
    ],
    [
      "multi-tenant Entra creating accounts for everyone",
      [{ id: "a", preset: "microsoft", tenant: "common", clientId: "c", createAccounts: true }],
      /admits every Microsoft organisation/,
    ],
    [
      "a domain rule with a wildcard",
      [{ id: "a", preset: "google", clientId: "c", admission: { emailDomains: ["*.example.com"] } }],
      /emailDomains must be/,
    ],
    [
      "a tenant rule that is not a GUID",
      [{ id: "a", preset: "google", clientId: "c", admission: { entraTenants: ["contoso"] } }],
      /entraTenants must be/,
    ],
    [
      "an organisation rule on OpenID Connect",
      [{ id: "a", preset: "google", clientId: "c", admission: { githubOrganizations: ["x"] } }],
      /needs a GitHub-style/,
    ],
    [
      "the same id twice",
      [
        { id: "a", preset: "google", clientId: "c" },
        { id: "a", preset: "gitlab", clientId: "c" },
      ],
      /lists the id "a" twice/,
    ],
  ];
  for (const [name, providers, message] of cases) {
    it(`refuses ${name}`, () => refused(providers, message));
  }

  it("refuses an empty provider list, and localPasswords that is not a boolean", () => {
    expect(() => resolveUpstreamSignIn({ providers: [] })).toThrow(/at least one provider/);
    expect(() =>
      resolveUpstreamSignIn({
        providers: [{ id: "a", preset: "google", clientId: "c" }],
        localPasswords: "no" as never,
      }),
    ).toThrow(/localPasswords must be a boolean/);
  });
});

describe("admission", () => {
  function provider(admission: ResolvedUpstreamProvider["admission"]): ResolvedUpstreamProvider {
    return { ...resolve({ id: "p", preset: "google", clientId: "c" }).providers[0]!, admission };
  }
  const profile = (extra: Partial<UpstreamProfile>): UpstreamProfile => ({
    provider: "p",
    subject: "s",
    emailVerified: true,
    email: "ada@example.com",
    claims: {},
    ...extra,
  });
  const reason = async (p: ResolvedUpstreamProvider, u: UpstreamProfile) =>
    (await admissionFailure(p, u))?.failure;

  it("e-mail domains: verified and exactly the domain (no suffix, no look-alike)", async () => {
    const rule = provider({ emailDomains: ["example.com"] });
    expect(await reason(rule, profile({}))).toBeUndefined();
    expect(await reason(rule, profile({ email: "Ada@EXAMPLE.com" }))).toBeUndefined();
    expect(await reason(rule, profile({ emailVerified: false }))).toBe("email_not_verified");
    expect(await reason(rule, profile({ email: undefined, emailVerified: false }))).toBe(
      "email_not_verified",
    );
    for (const email of [
      "ada@evil-example.com",
      "ada@example.com.evil.test",
      "ada@sub.example.com",
      "example.com@evil.test",
      "ada@example.com@evil.test",
    ]) {
      expect(await reason(rule, profile({ email }))).toBe("not_admitted");
    }
  });

  it("organisations, hosted domain and tenant", async () => {
    expect(
      await reason(provider({ githubOrganizations: ["acme"] }), profile({ organizations: ["acme"] })),
    ).toBeUndefined();
    expect(
      await reason(provider({ githubOrganizations: ["acme"] }), profile({ organizations: ["other"] })),
    ).toBe("not_admitted");
    expect(await reason(provider({ githubOrganizations: ["acme"] }), profile({}))).toBe("not_admitted");
    expect(
      await reason(provider({ googleHostedDomains: ["acme.com"] }), profile({ hostedDomain: "acme.com" })),
    ).toBeUndefined();
    // A consumer Google account has no `hd`.
    expect(await reason(provider({ googleHostedDomains: ["acme.com"] }), profile({}))).toBe("not_admitted");
    const tid = "9b2e0c4e-1f1a-4f7e-9d1e-2c3b4a5d6e7f";
    expect(await reason(provider({ entraTenants: [tid] }), profile({ tenantId: tid }))).toBeUndefined();
    expect(
      await reason(provider({ entraTenants: [tid] }), profile({ tenantId: tid.replace("9", "8") })),
    ).toBe("not_admitted");
  });

  it("every configured rule must pass, and the admit callback has the last word (a throw refuses)", async () => {
    const seen: UpstreamProfile[] = [];
    const both = provider({
      emailDomains: ["example.com"],
      admit: async (p) => {
        seen.push(p);
        return p.subject === "allowed";
      },
    });
    expect(await reason(both, profile({ subject: "allowed" }))).toBeUndefined();
    expect(await reason(both, profile({ subject: "other" }))).toBe("not_admitted");
    expect(await reason(both, profile({ subject: "allowed", email: "a@other.example" }))).toBe(
      "not_admitted",
    );
    expect(seen.map((p) => p.subject)).toEqual(["allowed", "other"]);
    const throwing = provider({
      admit: () => {
        throw new Error("directory down");
      },
    });
    expect(await reason(throwing, profile({}))).toBe("not_admitted");
    expect(await reason(provider({ admit: () => "yes" as unknown as boolean }), profile({}))).toBe(
      "not_admitted",
    );
  });
});
