import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  codeRequest,
  codeTokens,
  formRequest,
  ISSUER,
  issueCode,
  makeServer,
  PUBLIC_CLIENT,
  postToken,
  RESOURCE,
} from "../helpers.js";

async function json(response: Response) {
  return {
    status: response.status,
    headers: response.headers,
    body: (await response.json()) as Record<string, unknown>,
  };
}

function expectNoStore(headers: Headers) {
  expect(headers.get("cache-control")).toBe("no-store");
  expect(headers.get("pragma")).toBe("no-cache");
}

describe("token endpoint: odd requests get an OAuth error, never a 500 (SECURITY.md Token endpoint)", () => {
  it("GET is 405 with Allow and an OAuth JSON body, no-store", async () => {
    const t = await makeServer();
    const r = await json(await t.server.fetch(new Request(`${ISSUER}/token?grant_type=authorization_code`)));
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("POST, OPTIONS");
    expect(r.body.error).toBe("invalid_request");
    expectNoStore(r.headers);
  });

  it.each([
    ["application/json", JSON.stringify({ grant_type: "client_credentials" })],
    ["text/plain", "grant_type=client_credentials"],
    ["multipart/form-data; boundary=x", "--x--"],
    ["", "grant_type=client_credentials"],
  ])("content type %j is invalid_request", async (type, body) => {
    const t = await makeServer();
    const headers: Record<string, string> = type ? { "content-type": type } : {};
    const r = await json(
      await t.server.fetch(new Request(`${ISSUER}/token`, { method: "POST", headers, body })),
    );
    expect(r.status).toBe(400);
    expect(r.body.error).toBe("invalid_request");
    expectNoStore(r.headers);
  });

  it("accepts a charset parameter on the form content type", async () => {
    const t = await makeServer();
    const r = await t.server.fetch(
      new Request(`${ISSUER}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded; charset=UTF-8" },
        body: "grant_type=nope",
      }),
    );
    expect((await r.json()).error).toBe("unsupported_grant_type");
  });

  it("an oversized body is invalid_request (413), declared or streamed", async () => {
    const t = await makeServer();
    const big = `grant_type=client_credentials&pad=${"a".repeat(70 * 1024)}`;
    const declared = await json(await t.server.fetch(formRequest("/token", { pad: "a".repeat(70 * 1024) })));
    expect(declared.status).toBe(413);
    expect(declared.body.error).toBe("invalid_request");
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    const streamed = await json(
      await t.server.fetch(
        new Request(`${ISSUER}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: stream,
          duplex: "half",
        } as RequestInit),
      ),
    );
    expect(streamed.status).toBe(413);
    expectNoStore(streamed.headers);
  });

  it("a repeated parameter is invalid_request (RFC 6749 §3.1)", async () => {
    const t = await makeServer();
    const { code, verifier } = await issueCode(t);
    const body = new URLSearchParams(codeRequest(code, verifier));
    body.append("resource", "https://other.example.test/api");
    const r = await json(
      await t.server.fetch(
        new Request(`${ISSUER}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: body.toString(),
        }),
      ),
    );
    expect(r.body.error).toBe("invalid_request");
    // Refused before redemption: the code is still good.
    body.delete("resource");
    body.set("resource", RESOURCE);
    const ok = await t.server.fetch(formRequest("/token", Object.fromEntries(body)));
    expect(ok.status).toBe(200);
  });

  it("a missing or unknown grant_type is invalid_request / unsupported_grant_type", async () => {
    const t = await makeServer();
    expect((await postToken(t, { client_id: PUBLIC_CLIENT })).body.error).toBe("invalid_request");
    expect((await postToken(t, { grant_type: "password", client_id: PUBLIC_CLIENT })).body.error).toBe(
      "unsupported_grant_type",
    );
    expect((await postToken(t, { grant_type: "implicit", client_id: PUBLIC_CLIENT })).body.error).toBe(
      "unsupported_grant_type",
    );
  });

  it("invalid UTF-8 in the body is invalid_request", async () => {
    const t = await makeServer();
    const r = await t.server.fetch(
      new Request(`${ISSUER}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new Uint8Array([0x67, 0x3d, 0xff, 0xfe]),
      }),
    );
    expect(r.status).toBe(400);
  });

  it("tokens carry at least 128 bits of entropy and are all distinct", async () => {
    const t = await makeServer();
    const seen = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const body = await codeTokens(t);
      const refresh = body.refresh_token as string;
      // base64url: 6 bits per character.
      expect(refresh.length * 6).toBeGreaterThanOrEqual(128);
      const jti = JSON.parse(
        Buffer.from((body.access_token as string).split(".")[1]!, "base64url").toString(),
      ).jti;
      expect(jti.length * 6).toBeGreaterThanOrEqual(128);
      for (const v of [refresh, jti]) {
        expect(seen.has(v)).toBe(false);
        seen.add(v);
      }
    }
  });

  it("property: any form body gets JSON with no-store, a 2xx/4xx status and a clean error_description", async () => {
    const t = await makeServer();
    const names = fc.constantFrom(
      "grant_type",
      "code",
      "code_verifier",
      "redirect_uri",
      "resource",
      "client_id",
      "client_secret",
      "client_assertion",
      "client_assertion_type",
      "refresh_token",
      "scope",
    );
    const values = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.constantFrom(
        "authorization_code",
        "refresh_token",
        "client_credentials",
        PUBLIC_CLIENT,
        RESOURCE,
        "\u0000\r\n",
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(names, values), { maxLength: 8 }),
        fc.option(fc.string()),
        async (pairs, auth) => {
          const body = new URLSearchParams(pairs).toString();
          const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded" };
          // biome-ignore lint/suspicious/noControlCharactersInRegex: header values cannot carry controls
          if (auth !== null && !/[\u0000-\u001f\u007f-\uffff]/.test(auth))
            headers.authorization = `Basic ${auth}`;
          const r = await t.server.fetch(new Request(`${ISSUER}/token`, { method: "POST", headers, body }));
          expect(r.status).toBeLessThan(500);
          expect(r.headers.get("cache-control")).toBe("no-store");
          const parsed = (await r.json()) as Record<string, unknown>;
          if (r.status >= 400) {
            expect(typeof parsed.error).toBe("string");
            if (parsed.error_description !== undefined) {
              expect(parsed.error_description).toMatch(/^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/);
            }
          }
        },
      ),
      { numRuns: 150 },
    );
  });
});
