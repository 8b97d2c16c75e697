/**
 * Redirect URI matching at /authorize (SECURITY.md "Authorization endpoint": exact string match;
 * only a loopback IP literal's port may vary; dangerous schemes refused). Mutation tests go through
 * HTTP; property tests drive `matchRedirectUri` with fast-check.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { matchRedirectUri } from "../../../src/authorization-server/clients/redirect-uri.js";
import { authorizeUrl, type Harness, startHarness } from "../pages/harness.js";

const HTTPS_URI = "https://app.example:8443/oauth/cb?x=1";
const LOOPBACK_URI = "http://127.0.0.1/native/cb";

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
  await h.addClient({ clientId: "mutations", redirectUris: [HTTPS_URI, LOOPBACK_URI] });
});
afterAll(async () => {
  await h?.close();
});

/** Every single-character deletion, insertion and substitution of `uri` (distinct from it). */
function mutations(uri: string, alphabet: string): string[] {
  const out = new Set<string>();
  for (let i = 0; i <= uri.length; i++) {
    if (i < uri.length) out.add(uri.slice(0, i) + uri.slice(i + 1));
    for (const c of alphabet) {
      out.add(uri.slice(0, i) + c + uri.slice(i));
      if (i < uri.length) out.add(uri.slice(0, i) + c + uri.slice(i + 1));
    }
  }
  out.delete(uri);
  return [...out];
}

/** Characters that matter to URL parsers: case, separators, encodings, whitespace, controls. */
const ALPHABET = "aA/.:?#@%&=\\ \t\n\u0000x9";

async function isAccepted(uri: string): Promise<boolean> {
  // response_type=x: a matched URI gets an error *redirect* there; a mismatch gets a page.
  const response = await fetch(
    authorizeUrl(h.url, { client_id: "mutations", redirect_uri: uri, response_type: "x" }),
    { redirect: "manual" },
  );
  await response.body?.cancel();
  if (response.status === 303) {
    const location = response.headers.get("location")!;
    // Accepted only ever means "redirected to exactly the requested URI".
    expect(location.startsWith(`${uri}?`) || location.startsWith(`${uri}&`)).toBe(true);
    return true;
  }
  expect(response.status).toBe(400);
  expect(response.headers.get("location")).toBeNull();
  return false;
}

describe("any single-character mutation of a registered URI does not match", () => {
  it("for an https URI (via /authorize)", async () => {
    const all = mutations(HTTPS_URI, ALPHABET);
    expect(all.length).toBeGreaterThan(500);
    const accepted: string[] = [];
    // Small batches: the machine is shared.
    for (let i = 0; i < all.length; i += 20) {
      const batch = all.slice(i, i + 20);
      const results = await Promise.all(batch.map(isAccepted));
      batch.forEach((uri, j) => {
        if (results[j]) accepted.push(uri);
      });
    }
    expect(accepted).toEqual([]);
    expect(await isAccepted(HTTPS_URI)).toBe(true);
  }, 120_000);

  it("for a loopback URI nothing but the port may change (RFC 8252 §7.3)", async () => {
    const all = mutations(LOOPBACK_URI, ALPHABET);
    const accepted: string[] = [];
    for (let i = 0; i < all.length; i += 20) {
      const batch = all.slice(i, i + 20);
      const results = await Promise.all(batch.map(isAccepted));
      batch.forEach((uri, j) => {
        if (results[j]) accepted.push(uri);
      });
    }
    expect(accepted).toEqual([]);
    // The port is the one thing that may change; each mutation of the port-bearing form fails.
    expect(await isAccepted("http://127.0.0.1:51234/native/cb")).toBe(true);
    const withPort = mutations("http://127.0.0.1:51234/native/cb", ALPHABET.replace("9", ""));
    const portOnly = (
      await Promise.all(withPort.slice(0, 400).map(async (u) => ((await isAccepted(u)) ? u : undefined)))
    )
      .filter((u): u is string => u !== undefined)
      .filter((u) => !/^http:\/\/127\.0\.0\.1(:\d{1,5})?\/native\/cb$/.test(u));
    expect(portOnly).toEqual([]);
  }, 120_000);
});

describe("matchRedirectUri properties", () => {
  it("an https registration matches only itself", () => {
    fc.assert(
      fc.property(
        fc.webUrl({ validSchemes: ["https"], withQueryParameters: true }),
        fc.string(),
        (reg, other) => {
          const candidate = `${reg}${other}`;
          const matched = matchRedirectUri([reg], candidate);
          expect(matched === undefined || candidate === reg).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("a loopback registration matches only itself with another port", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 65535 }),
        fc.constantFrom("/cb", "/a/b", "/cb?x=1", "/"),
        fc.string({ maxLength: 3 }),
        (port, path, junk) => {
          const reg = `http://127.0.0.1${path}`;
          expect(matchRedirectUri([reg], `http://127.0.0.1:${port}${path}`)).toBe(reg);
          const other = `http://127.0.0.1:${port}${path}${junk}`;
          if (junk !== "") expect(matchRedirectUri([reg], other)).toBeUndefined();
        },
      ),
      { numRuns: 300 },
    );
  });

  it("dangerous schemes never match an https registration, whatever their spelling", () => {
    const scheme = fc
      .constantFrom("javascript", "data", "vbscript", "file")
      .chain((s) =>
        fc
          .array(fc.boolean(), { minLength: s.length, maxLength: s.length })
          .map((upper) => [...s].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join("")),
      );
    const prefix = fc.constantFrom("", " ", "\t", "\n", "\u0000", "\u001f", "\u00a0");
    fc.assert(
      fc.property(scheme, prefix, (s, p) => {
        const uri = `${p}${s}:alert(document.domain)//`;
        expect(matchRedirectUri(["https://app.example/cb"], uri)).toBeUndefined();
      }),
      { numRuns: 300 },
    );
  });
});
