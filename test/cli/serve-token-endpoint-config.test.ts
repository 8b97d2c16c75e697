/**
 * `gatehouse serve` and the token endpoint's configuration beyond the code flow: `dpop`,
 * `tokenExchange`, `enterpriseAuthorization` and `workloadIdentity` in the config file, `--no-dpop`
 * and `--dpop-require-nonce` on the command line. Each section reaches a running server (metadata,
 * and real token requests: a workload JWT, a DPoP proof asked for its nonce, an exchange, an ID-JAG),
 * and a bad value is a usage error (exit 2) at parse time naming the setting, decided by the
 * authorization server's own resolver.
 */
import { randomUUID } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { OPTION_LIMITS } from "../../src/authorization-server/core/option-limits.js";
import { parseCommandArgs, UsageError } from "../../src/cli/args.js";
import { SERVE_OPTIONS } from "../../src/cli/commands/serve.js";
import { buildServeConfig, SQLITE_FILE } from "../../src/cli/config.js";
import { openCliStore } from "../../src/cli/server-runtime.js";
import { ensureBuilt, type RunningCli, runCli, startCli, tempDir } from "./helpers.js";

const RESOURCE_A = "http://localhost:9001";
const RESOURCE_B = "http://localhost:9002";
const CLIENT_ID = "svc";
/** The secret `gatehouse clients add` generated for `svc` (set by dataDirWithClient). */
let clientSecret = "";
const WORKLOAD_ISSUER = "https://ci.example.test";
const WORKLOAD_SUBJECT = "system:serviceaccount:ci:runner";
const IDP_ISSUER = "https://idp.example.test";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";

type Ready = { issuer: string; port: number };
type KeyPair = Awaited<ReturnType<typeof generateKeyPair>>;

let dir: ReturnType<typeof tempDir>;
let workloadKey: KeyPair;
let idpKey: KeyPair;
let dpopKey: KeyPair;
let dpopJwk: JWK;
const running: RunningCli<Ready>[] = [];

beforeAll(async () => {
  ensureBuilt();
  dir = tempDir("gatehouse-token-config-");
  workloadKey = await generateKeyPair("ES256", { extractable: true });
  idpKey = await generateKeyPair("ES256", { extractable: true });
  dpopKey = await generateKeyPair("ES256", { extractable: true });
  dpopJwk = await exportJWK(dpopKey.publicKey);
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((r) => r.stop()));
});
afterAll(() => dir.remove());

/** The config file of a server using all four sections, with these changes. */
async function fullConfig(overrides: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
  return {
    resources: [
      { uri: RESOURCE_A, scopes: ["notes:read"] },
      { uri: RESOURCE_B, scopes: ["notes:read", "files:read"] },
    ],
    dpop: { signingAlgorithms: ["ES256", "EdDSA"], iatWindowSeconds: 30, nonceLifetimeSeconds: 120 },
    tokenExchange: {
      policies: [{ clientId: CLIENT_ID, fromResource: RESOURCE_A, toResources: [RESOURCE_B] }],
    },
    workloadIdentity: {
      issuers: [
        {
          issuer: WORKLOAD_ISSUER,
          jwks: { keys: [{ ...(await exportJWK(workloadKey.publicKey)), kid: "wl-1" }] },
          algorithms: ["ES256"],
          subjects: [{ subject: WORKLOAD_SUBJECT, clientId: CLIENT_ID, scopes: ["notes:read"] }],
        },
      ],
      maxAssertionLifetimeSeconds: 600,
    },
    enterpriseAuthorization: {
      identityProviders: [
        {
          issuer: IDP_ISSUER,
          jwks: { keys: [{ ...(await exportJWK(idpKey.publicKey)), kid: "idp-1" }] },
          clients: [CLIENT_ID],
        },
      ],
    },
    ...overrides,
  };
}

function configFile(content: unknown): string {
  const file = join(dir.path, `gatehouse-${randomUUID()}.json`);
  writeFileSync(file, JSON.stringify(content));
  return file;
}

const PARSE_BASE = ["--insecure-loopback", "--resource", RESOURCE_A, "--scopes", "notes:read"];

function build(args: string[]) {
  return buildServeConfig(parseCommandArgs(args, SERVE_OPTIONS));
}

function refusal(args: string[]): string {
  try {
    build(args);
  } catch (error) {
    expect(error).toBeInstanceOf(UsageError);
    return (error as Error).message;
  }
  throw new Error(`accepted: ${args.join(" ")}`);
}

/**
 * A fresh data directory with the confidential client `svc` that may use both new grants,
 * registered the way an operator does it: `gatehouse clients add --grant-type ...`.
 */
async function dataDirWithClient(): Promise<string> {
  const data = join(dir.path, randomUUID());
  const added = await runCli([
    "clients",
    "add",
    "--name",
    "Service",
    "--client-id",
    CLIENT_ID,
    "--confidential",
    "--grant-type",
    JWT_BEARER,
    "--grant-type",
    TOKEN_EXCHANGE,
    "--data",
    data,
    "--json",
  ]);
  expect(added.code, added.stderr).toBe(0);
  const client = JSON.parse(added.stdout) as { client_secret: string; grant_types: string[] };
  expect(client.grant_types).toEqual([JWT_BEARER, TOKEN_EXCHANGE]);
  clientSecret = client.client_secret;
  const store = await openCliStore({ kind: "sqlite", path: join(data, SQLITE_FILE) });
  try {
    // A service client: no redirect URI, no authorization code grant.
    expect(await store.getClient(CLIENT_ID)).toMatchObject({
      redirectUris: [],
      grantTypes: [JWT_BEARER, TOKEN_EXCHANGE],
    });
  } finally {
    await store.close();
  }
  return data;
}

async function serve(args: string[], data: string): Promise<RunningCli<Ready>> {
  const r = await startCli<Ready>([
    "serve",
    "--json",
    "--insecure-loopback",
    "--port",
    "0",
    "--data",
    data,
    ...args,
  ]);
  running.push(r);
  return r;
}

async function metadataOf(issuer: string): Promise<Record<string, unknown>> {
  const response = await fetch(`${issuer}/.well-known/oauth-authorization-server`);
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, unknown>;
}

async function assertion(key: KeyPair, claims: JWTPayload, typ = "JWT", kid = "wl-1"): Promise<string> {
  return new SignJWT({ jti: randomUUID(), ...claims })
    .setProtectedHeader({ alg: "ES256", typ, kid })
    .setIssuedAt()
    .setExpirationTime("2m")
    .sign(key.privateKey);
}

async function dpopProof(tokenEndpoint: string, nonce?: string): Promise<string> {
  return new SignJWT({ jti: randomUUID(), htm: "POST", htu: tokenEndpoint, ...(nonce ? { nonce } : {}) })
    .setProtectedHeader({ alg: "ES256", typ: "dpop+jwt", jwk: dpopJwk })
    .setIssuedAt()
    .sign(dpopKey.privateKey);
}

async function tokenRequest(
  tokenEndpoint: string,
  form: Record<string, string>,
  proof?: string,
): Promise<{ status: number; body: Record<string, unknown>; nonce: string | null }> {
  const response = await fetch(tokenEndpoint, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${clientSecret}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
      ...(proof ? { dpop: proof } : {}),
    },
    body: new URLSearchParams(form),
  });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
    nonce: response.headers.get("dpop-nonce"),
  };
}

describe("serve: DPoP, token exchange, ID-JAG and workload identity reach the running server", () => {
  it("metadata, a workload token, DPoP with a required nonce, an exchange and an ID-JAG", async () => {
    const data = await dataDirWithClient();
    const server = await serve(["--config", configFile(await fullConfig()), "--dpop-require-nonce"], data);
    const { issuer } = server.ready;
    const metadata = await metadataOf(issuer);
    expect(metadata.dpop_signing_alg_values_supported).toEqual(["ES256", "EdDSA"]);
    expect(metadata.grant_types_supported).toEqual(expect.arrayContaining([TOKEN_EXCHANGE, JWT_BEARER]));
    const tokenEndpoint = String(metadata.token_endpoint);

    // Workload identity: the mapped subject acts as svc (RFC 7523 §2.1).
    const workloadClaims = { iss: WORKLOAD_ISSUER, sub: WORKLOAD_SUBJECT, aud: issuer };
    const bearer = await tokenRequest(tokenEndpoint, {
      grant_type: JWT_BEARER,
      assertion: await assertion(workloadKey, workloadClaims),
      resource: RESOURCE_A,
    });
    expect(bearer.status, JSON.stringify(bearer.body)).toBe(200);
    expect(bearer.body).toMatchObject({ token_type: "Bearer", scope: "notes:read" });

    // dpop.requireNonce (from the flag): a proof without the server's nonce is sent back for it.
    const form = {
      grant_type: JWT_BEARER,
      assertion: await assertion(workloadKey, workloadClaims),
      resource: RESOURCE_A,
    };
    const noNonce = await tokenRequest(tokenEndpoint, form, await dpopProof(tokenEndpoint));
    expect(noNonce.status).toBe(400);
    expect(noNonce.body.error).toBe("use_dpop_nonce");
    expect(noNonce.nonce).toMatch(/^[\w-]+$/);
    const bound = await tokenRequest(tokenEndpoint, form, await dpopProof(tokenEndpoint, noNonce.nonce!));
    expect(bound.status, JSON.stringify(bound.body)).toBe(200);
    expect(bound.body.token_type).toBe("DPoP");

    // tokenExchange: svc serves A and may exchange A's token for one for B (RFC 8693).
    const exchanged = await tokenRequest(tokenEndpoint, {
      grant_type: TOKEN_EXCHANGE,
      subject_token: String(bearer.body.access_token),
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource: RESOURCE_B,
    });
    expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
    expect(exchanged.body.issued_token_type).toBe(ACCESS_TOKEN_TYPE);
    // ...and not for a resource no policy names.
    const refused = await tokenRequest(tokenEndpoint, {
      grant_type: TOKEN_EXCHANGE,
      subject_token: String(bearer.body.access_token),
      subject_token_type: ACCESS_TOKEN_TYPE,
      resource: RESOURCE_A,
    });
    expect(refused.status).toBe(400);

    // enterpriseAuthorization: an ID-JAG of the configured identity provider for svc.
    const idJag = await assertion(
      idpKey,
      {
        iss: IDP_ISSUER,
        sub: "alice",
        aud: issuer,
        client_id: CLIENT_ID,
        resource: RESOURCE_A,
        scope: "notes:read",
      },
      "oauth-id-jag+jwt",
      "idp-1",
    );
    const enterprise = await tokenRequest(tokenEndpoint, { grant_type: JWT_BEARER, assertion: idJag });
    expect(enterprise.status, JSON.stringify(enterprise.body)).toBe(200);
    expect(enterprise.body.scope).toBe("notes:read");
  });

  it("--no-dpop: no DPoP algorithms advertised; without the sections, no new grant types", async () => {
    const data = await dataDirWithClient();
    const server = await serve(["--resource", RESOURCE_A, "--scopes", "notes:read", "--no-dpop"], data);
    const metadata = await metadataOf(server.ready.issuer);
    expect(metadata).not.toHaveProperty("dpop_signing_alg_values_supported");
    expect(metadata.grant_types_supported).not.toContain(TOKEN_EXCHANGE);
    expect(metadata.grant_types_supported).not.toContain(JWT_BEARER);
  });

  it("gatehouse serve exits 2, naming the setting, before it listens", async () => {
    const data = join(dir.path, randomUUID());
    const bad = configFile(await fullConfig({ dpop: { signingAlgorithms: ["HS256"] } }));
    const result = await runCli([
      "serve",
      "--insecure-loopback",
      "--port",
      "0",
      "--data",
      data,
      "--config",
      bad,
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/dpop\.signingAlgorithms/);
    expect(result.stdout).toBe("");
  });
});

describe("serve: bad token endpoint settings are usage errors naming the setting", () => {
  it("passes the sections through, and the flags set DPoP", async () => {
    const file = await fullConfig();
    const config = build([...PARSE_BASE, "--resource", RESOURCE_B, "--config", configFile(file)]);
    expect(config.server.dpop).toEqual(file.dpop);
    expect(config.server.tokenExchange).toEqual(file.tokenExchange);
    expect(config.server.workloadIdentity).toEqual(file.workloadIdentity);
    expect(config.server.enterpriseAuthorization).toEqual(file.enterpriseAuthorization);
    expect(build([...PARSE_BASE, "--no-dpop"]).server.dpop).toEqual({ enabled: false });
    expect(build([...PARSE_BASE, "--dpop-require-nonce"]).server.dpop).toEqual({ requireNonce: true });
    expect(build(PARSE_BASE).server.dpop).toBeUndefined();
    expect(refusal([...PARSE_BASE, "--no-dpop", "--dpop-require-nonce"])).toMatch(/--no-dpop/);
  });

  it("refuses each bad value with the name of its setting", async () => {
    const wl = ((await fullConfig()).workloadIdentity as { issuers: Record<string, unknown>[] }).issuers[0]!;
    const idp = (
      (await fullConfig()).enterpriseAuthorization as { identityProviders: Record<string, unknown>[] }
    ).identityProviders[0]!;
    const privateJwk = await exportJWK((await generateKeyPair("ES256", { extractable: true })).privateKey);
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ dpop: { signingAlgorithms: ["HS256"] } }, /dpop\.signingAlgorithms/],
      [{ dpop: { signingAlgorithms: ["none"] } }, /dpop\.signingAlgorithms/],
      [{ dpop: { signingAlgorithms: [] } }, /dpop\.signingAlgorithms/],
      [
        { dpop: { iatWindowSeconds: OPTION_LIMITS["dpop.iatWindowSeconds"].max + 1 } },
        /dpop\.iatWindowSeconds/,
      ],
      [
        { dpop: { nonceLifetimeSeconds: OPTION_LIMITS["dpop.nonceLifetimeSeconds"].min - 1 } },
        /dpop\.nonceLifetimeSeconds/,
      ],
      [{ dpop: { requireNonce: "yes" } }, /dpop\.requireNonce/],
      [{ dpop: { nonce: true } }, /dpop/],
      [{ tokenExchange: { policies: [] } }, /tokenExchange\.policies/],
      [
        {
          tokenExchange: {
            policies: [
              { clientId: CLIENT_ID, fromResource: RESOURCE_A, toResources: ["https://other.example.test"] },
            ],
          },
        },
        /tokenExchange\.policies\[0\]/,
      ],
      [
        {
          tokenExchange: {
            policies: [
              {
                clientId: CLIENT_ID,
                fromResource: RESOURCE_A,
                toResources: [RESOURCE_B],
                scopes: ["bad scope"],
              },
            ],
          },
        },
        /tokenExchange\.policies\.0\.scopes/,
      ],
      [
        { workloadIdentity: { issuers: [{ ...wl, algorithms: ["HS256"] }] } },
        /workloadIdentity\.issuers\[0\]\.algorithms/,
      ],
      [
        { workloadIdentity: { issuers: [{ ...wl, subjects: [] }] } },
        /workloadIdentity\.issuers\.0\.subjects/,
      ],
      [
        {
          workloadIdentity: {
            issuers: [
              {
                ...wl,
                subjects: [
                  { subject: "a", clientId: "x" },
                  { subject: "a", clientId: "y" },
                ],
              },
            ],
          },
        },
        /workloadIdentity\.issuers\[0\]\.subjects/,
      ],
      [{ workloadIdentity: { issuers: [wl, wl] } }, /workloadIdentity\.issuers/],
      [
        { workloadIdentity: { issuers: [{ ...wl, jwksUri: "https://ci.example.test/jwks" }] } },
        /workloadIdentity\.issuers\[0\]/,
      ],
      [
        { workloadIdentity: { issuers: [wl], maxAssertionLifetimeSeconds: 5 } },
        /workloadIdentity\.maxAssertionLifetimeSeconds/,
      ],
      [{ workloadIdentity: { issuers: [wl], dangerouslyAllowLoopbackForTesting: {} } }, /workloadIdentity/],
      [
        { enterpriseAuthorization: { identityProviders: [{ ...idp, jwks: { keys: [privateJwk] } }] } },
        /enterpriseAuthorization\.identityProviders\[0\]\.jwks\.keys\[0\]/,
      ],
      [
        {
          enterpriseAuthorization: {
            identityProviders: [{ issuer: IDP_ISSUER, jwksUri: "http://idp.example.test/jwks" }],
          },
        },
        /enterpriseAuthorization\.identityProviders\[0\]\.jwksUri/,
      ],
      [
        { enterpriseAuthorization: { identityProviders: [{ issuer: IDP_ISSUER }] } },
        /enterpriseAuthorization\.identityProviders\[0\]/,
      ],
      [
        {
          enterpriseAuthorization: {
            identityProviders: [idp],
            maxAssertionLifetimeSeconds:
              OPTION_LIMITS["enterpriseAuthorization.maxAssertionLifetimeSeconds"].max + 1,
          },
        },
        /enterpriseAuthorization\.maxAssertionLifetimeSeconds/,
      ],
    ];
    for (const [overrides, setting] of cases) {
      const file = configFile(await fullConfig(overrides));
      expect(
        refusal([...PARSE_BASE, "--resource", RESOURCE_B, "--config", file]),
        JSON.stringify(overrides),
      ).toMatch(setting);
    }
  });
});
