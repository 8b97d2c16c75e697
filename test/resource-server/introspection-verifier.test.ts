import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { cachedVerifier, introspectionVerifier } from "../../src/resource-server/index.js";
import { GatehouseTypeError, OAuthError } from "../../src/shared/errors.js";

const AUD = "https://mcp.example.com/api";
const ISS = "https://auth.example.com";

// A real RFC 7662 endpoint on loopback: checks client_secret_basic and answers from a table.
let server: ListeningServer;
let calls: { authorization: string | null; body: URLSearchParams }[] = [];
let answers: Record<string, { status?: number; body: unknown }> = {};

beforeAll(async () => {
  server = await listen(async (request) => {
    const body = new URLSearchParams(await request.text());
    calls.push({ authorization: request.headers.get("authorization"), body });
    const expected = `Basic ${Buffer.from("rs%3Aone:s3cr%2Bt+x").toString("base64")}`;
    if (request.headers.get("authorization") !== expected) {
      return Response.json({ error: "invalid_client" }, { status: 401 });
    }
    const answer = answers[body.get("token") ?? ""] ?? { body: { active: false } };
    return Response.json(answer.body, { status: answer.status ?? 200 });
  });
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => {
  calls = [];
  answers = {};
});

const now = () => Math.floor(Date.now() / 1000);
const verifier = (extra = {}) =>
  introspectionVerifier({
    endpoint: `${server.url}/introspect`,
    clientId: "rs:one",
    clientSecret: "s3cr+t x",
    audience: AUD,
    issuer: ISS,
    ...extra,
  });

async function rejects(promise: Promise<unknown>, code = "invalid_token") {
  try {
    await promise;
    expect.unreachable("expected a rejection");
  } catch (error) {
    expect(error).toBeInstanceOf(OAuthError);
    expect((error as OAuthError).code).toBe(code);
  }
}

describe("introspectionVerifier (RFC 7662)", () => {
  it("authenticates with client_secret_basic (form-encoded id and secret) and maps an active token", async () => {
    answers.t1 = {
      body: { active: true, sub: "u", client_id: "c", scope: "a b", aud: AUD, iss: ISS, exp: now() + 60 },
    };
    const auth = await verifier().verify("t1");
    expect(auth).toMatchObject({
      subject: "u",
      clientId: "c",
      scopes: ["a", "b"],
      audience: [AUD],
      issuer: ISS,
    });
    expect(calls[0]!.body.get("token_type_hint")).toBe("access_token");
    expect(auth.tokenId).toBeUndefined();
  });

  it("exposes the response's jti as tokenId (RFC 7662 §2.2)", async () => {
    answers.t2 = { body: { active: true, jti: "at-123", aud: AUD, iss: ISS, exp: now() + 60 } };
    expect((await verifier().verify("t2")).tokenId).toBe("at-123");
  });

  it.each([
    ["inactive", { active: false }],
    ["active as a string", { active: "true", aud: AUD, iss: ISS, exp: 9e9 }],
    ["another audience", { active: true, aud: "https://other.example", iss: ISS, exp: 9e9 }],
    ["an audience prefixed by ours", { active: true, aud: `${AUD}x`, iss: ISS, exp: 9e9 }],
    ["no audience", { active: true, iss: ISS, exp: 9e9 }],
    ["a foreign issuer", { active: true, aud: AUD, iss: "https://evil.example", exp: 9e9 }],
    ["an expired exp", { active: true, aud: AUD, iss: ISS, exp: 1000 }],
    ["no exp", { active: true, aud: AUD, iss: ISS }],
  ])("rule: %s → invalid_token", async (_name, body) => {
    answers.t = { body };
    await rejects(verifier().verify("t"));
  });

  it("rule: endpoint failures are temporarily_unavailable, not invalid_token", async () => {
    answers.t = { status: 500, body: {} };
    await rejects(verifier().verify("t"), "temporarily_unavailable");
    answers.t = { body: [1, 2] };
    await rejects(verifier().verify("t"), "temporarily_unavailable");
    await rejects(verifier({ clientSecret: "wrong" }).verify("t"), "temporarily_unavailable");
    await rejects(
      introspectionVerifier({
        endpoint: "http://127.0.0.1:1/x",
        clientId: "a",
        clientSecret: "b",
        audience: AUD,
      }).verify("t"),
      "temporarily_unavailable",
    );
  });

  it("rule: the response is read up to a byte cap (64 KiB by default); a larger one is temporarily_unavailable", async () => {
    const claims = { active: true, sub: "u", client_id: "c", aud: AUD, iss: ISS, exp: now() + 60 };
    answers.big = { body: { ...claims, padding: "x".repeat(1024 * 1024) } };
    await rejects(verifier().verify("big"), "temporarily_unavailable");
    // Under a cap the operator raised, the same answer is an ordinary active token.
    expect((await verifier({ maxResponseBytes: 2 * 1024 * 1024 }).verify("big")).subject).toBe("u");
  });

  it("with cachedVerifier, a token is introspected once", async () => {
    answers.t2 = { body: { active: true, aud: AUD, iss: ISS, exp: now() + 60 } };
    const cached = cachedVerifier(verifier());
    await cached.verify("t2");
    await cached.verify("t2");
    await Promise.all([cached.verify("t2"), cached.verify("t2")]);
    expect(calls).toHaveLength(1);
  });

  it("refuses bad options at set-up", () => {
    const base = {
      endpoint: "https://as.example/introspect",
      clientId: "a",
      clientSecret: "b",
      audience: AUD,
    };
    expect(() => introspectionVerifier({ ...base, endpoint: "http://as.example/i" })).toThrow(
      GatehouseTypeError,
    );
    expect(() => introspectionVerifier({ ...base, clientSecret: "" })).toThrow(GatehouseTypeError);
    expect(() => introspectionVerifier({ ...base, endpoint: "nope" })).toThrow(GatehouseTypeError);
  });
});
