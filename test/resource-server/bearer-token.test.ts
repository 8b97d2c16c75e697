import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BearerRequestHead,
  extractBearerToken as extractFromHead,
  headOfRequest,
} from "../../src/resource-server/bearer-token.js";
import { OAuthError } from "../../src/shared/errors.js";

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/".split("");
const b64token = fc
  .tuple(fc.string({ unit: fc.constantFrom(...B64), minLength: 1, maxLength: 60 }), fc.nat({ max: 2 }))
  .map(([body, pad]) => body + "=".repeat(pad));
const caseOf = (word: string) =>
  fc
    .array(fc.boolean(), { minLength: word.length, maxLength: word.length })
    .map((flags) => [...word].map((c, i) => (flags[i] ? c.toUpperCase() : c.toLowerCase())).join(""));

const request = (authorization?: string, url = "https://r.example/x") =>
  new Request(url, authorization === undefined ? {} : { headers: { authorization } });

/** The extraction on a web Request's head, always as a promise (so a refusal is a rejection). */
const extractBearerToken = async (request: Request) => extractFromHead(headOfRequest(request));

describe("extractBearerToken (RFC 6750 §2.1)", () => {
  it("returns the token for 'Bearer <b64token>' in any letter case", async () => {
    await fc.assert(
      fc.asyncProperty(caseOf("bearer"), b64token, async (scheme, token) => {
        expect(await extractBearerToken(request(`${scheme} ${token}`))).toBe(token);
      }),
    );
  });

  it("never throws anything but invalid_request, and never returns a malformed token", async () => {
    const headerValue = fc.string({
      unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
      maxLength: 80,
    });
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          headerValue,
          headerValue.map((v) => `Bearer ${v}`),
        ),
        async (value) => {
          try {
            const token = await extractBearerToken(request(value));
            if (token !== undefined) expect(token).toMatch(/^[A-Za-z0-9\-._~+/]+=*$/);
          } catch (error) {
            expect(error).toBeInstanceOf(OAuthError);
            expect((error as OAuthError).code).toBe("invalid_request");
          }
        },
      ),
      { numRuns: 500 },
    );
  });

  it("treats other schemes as no credentials", async () => {
    expect(await extractBearerToken(request("Basic dXNlcjpwYXNz"))).toBeUndefined();
    expect(await extractBearerToken(request("DPoP abc"))).toBeUndefined();
    expect(await extractBearerToken(request())).toBeUndefined();
  });

  it("rule: access_token in the query is refused whatever its spelling position", async () => {
    for (const url of [
      "https://r.example/x?access_token=a",
      "https://r.example/x?a=1&access_token=",
      "https://r.example/x?access_token",
    ]) {
      await expect(extractBearerToken(request("Bearer abc", url))).rejects.toMatchObject({
        code: "invalid_request",
      });
    }
    // A parameter that merely contains the name is not a token.
    expect(
      await extractBearerToken(request("Bearer abc", "https://r.example/x?my_access_token_hint=1")),
    ).toBe("abc");
  });

  it("refuses a form body carrying access_token, and leaves the body readable otherwise", async () => {
    const form = (body: string, type = "application/x-www-form-urlencoded; charset=UTF-8") =>
      new Request("https://r.example/x", { method: "POST", headers: { "content-type": type }, body });
    await expect(extractBearerToken(form("access_token=abc"))).rejects.toMatchObject({
      code: "invalid_request",
    });
    const ok = form("a=1");
    expect(await extractBearerToken(ok)).toBeUndefined();
    expect(await ok.text()).toBe("a=1");
    // JSON bodies are not forms: a field named access_token there is application data.
    expect(await extractBearerToken(form('{"access_token":"x"}', "application/json"))).toBeUndefined();
  });

  it("rule: a form body is checked for every method with body semantics, never for GET or HEAD (RFC 6750 §2.2)", async () => {
    let reads = 0;
    const head = (method: string | undefined): BearerRequestHead => ({
      url: "/x",
      ...(method === undefined ? {} : { method }),
      header: (name) => (name === "content-type" ? "application/x-www-form-urlencoded" : null),
      hasBody: true,
      bodyText: async () => {
        reads++;
        return "access_token=abc";
      },
    });
    for (const method of ["POST", "PUT", "PATCH", "DELETE", "OPTIONS", "post", undefined]) {
      await expect(
        Promise.resolve().then(() => extractFromHead(head(method))),
        String(method),
      ).rejects.toMatchObject({ code: "invalid_request" });
    }
    expect(reads).toBe(7);
    // RFC 6750 §2.2: the form-encoded body parameter method MUST NOT be used with GET (HEAD has no
    // body semantics either): such a request never carries a form token, its body is not read.
    expect(extractFromHead(head("GET"))).toBeUndefined();
    expect(extractFromHead(head("HEAD"))).toBeUndefined();
    expect(reads).toBe(7);
  });
});
