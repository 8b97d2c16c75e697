/**
 * Sealed authorization codes (grants/sealed-code.ts): the sealer on its own (round trip, nothing
 * readable, every alteration refused, other issuers and keys refused, KEK rotation, bounded input)
 * and whole flows on a real server with key-encryption keys (nothing stored before redemption,
 * single use with revocation on replay, tampered, foreign and expired codes refused without
 * spending the real one, a refused verifier spending it), and without keys (codes stored as before).
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import type { SealedCodeRecord } from "../../../src/authorization-server/core/context.js";
import { createCodeSealer } from "../../../src/authorization-server/grants/sealed-code.js";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import { OAuthError } from "../../../src/shared/errors.js";
import { Agent } from "../pages/harness.js";
import {
  approve,
  type FlowServer,
  publicClient,
  redeem,
  refresh,
  signIn,
  startFlowServer,
} from "../support/flow-server.js";

const ISSUER = "https://as.example";
const kek = () => randomBytes(32).toString("base64url");
/** The clock the codes below are opened at: the record's creation time. */
const NOW = 1_790_000_000_000;
const HOUR = 3_600_000;

function record(overrides: Partial<SealedCodeRecord> = {}): SealedCodeRecord {
  return {
    grantId: "0mhv3k2a1grant-id-random-part",
    clientId: "https://app.example/client.json",
    userId: "user-alice-1",
    redirectUri: "https://app.example/callback",
    redirectUriSent: true,
    scopes: ["notes:read", "offline_access"],
    resource: "https://notes.example/mcp",
    codeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
    codeChallengeMethod: "S256",
    refreshAllowed: true,
    sessionHash: "f3Zq9p0u1d4Jm9Y8bM5m1c8Q0a4b7w2r9s6t3u1v0xA",
    dpopJkt: "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I",
    createdAt: 1_790_000_000_000,
    expiresAt: 1_790_000_060_000,
    ...overrides,
  };
}

describe("the code sealer", () => {
  it("opens what it sealed, every member as it was (optional members absent stay absent)", () => {
    const sealer = createCodeSealer(ISSUER, [kek()])!;
    expect(sealer.open(sealer.seal(record()), NOW)).toEqual(record());
    const bare = record({ redirectUriSent: false, refreshAllowed: false, scopes: [] });
    delete bare.sessionHash;
    delete bare.dpopJkt;
    expect(sealer.open(sealer.seal(bare), NOW)).toEqual(bare);
  });

  it("no sealer without key-encryption keys (codes are then stored)", () => {
    expect(createCodeSealer(ISSUER, undefined)).toBeUndefined();
    expect(createCodeSealer(ISSUER, [])).toBeUndefined();
  });

  it("the code says nothing of its record; two codes of one record differ", () => {
    const sealer = createCodeSealer(ISSUER, [kek()])!;
    const r = record();
    const code = sealer.seal(r);
    const bytes = Buffer.from(code.slice(code.indexOf(".") + 1), "base64url").toString("latin1");
    for (const secret of [
      r.userId,
      r.clientId,
      r.redirectUri,
      r.codeChallenge,
      r.sessionHash!,
      "notes:read",
    ]) {
      expect(code).not.toContain(secret);
      expect(bytes).not.toContain(secret);
    }
    expect(sealer.seal(r)).not.toBe(code);
    expect(code).toMatch(/^[A-Za-z0-9_-]{12}\.[0-9a-z]+\.[A-Za-z0-9_-]+$/);
  });

  it("hostile: every one-character change of the sealed part is refused", () => {
    const sealer = createCodeSealer(ISSUER, [kek()])!;
    const code = sealer.seal(record());
    const start = code.lastIndexOf(".") + 1;
    let refused = 0;
    for (let i = start; i < code.length; i++) {
      const swapped = code[i] === "A" ? "B" : "A";
      const altered = code.slice(0, i) + swapped + code.slice(i + 1);
      // Also the last character, whose unused bits decode to the same bytes: one spelling opens.
      expect(sealer.open(altered, NOW)).toBeUndefined();
      refused++;
    }
    expect(refused).toBeGreaterThan(300);
  });

  it("hostile: a code opens under one spelling only (no other last character, no base64 alphabet, no padding)", () => {
    const sealer = createCodeSealer(ISSUER, [kek()])!;
    // A body whose length is not a multiple of 3 bytes leaves unused bits in the last character;
    // records one byte apart cover both such lengths.
    let variants = 0;
    for (const grantId of ["g", "gg", "ggg"]) {
      const code = sealer.seal(record({ grantId }));
      expect(sealer.open(code, NOW)).toEqual(record({ grantId }));
      const head = code.slice(0, -1);
      for (const ch of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") {
        if (ch === code.at(-1)) continue;
        variants++;
        // The code's SHA-256 is its single-use key at redemption: a second spelling that opened
        // would be a second code for the same grant (OAuth 2.1 §4.1.2, used once).
        expect(sealer.open(head + ch, NOW)).toBeUndefined();
      }
      const body = code.slice(code.lastIndexOf(".") + 1);
      const standard = Buffer.from(body, "base64url").toString("base64");
      const prefix = code.slice(0, code.length - body.length);
      if (standard !== body) expect(sealer.open(prefix + standard, NOW)).toBeUndefined();
      expect(sealer.open(`${code}=`, NOW)).toBeUndefined();
      expect(sealer.open(`${code}==`, NOW)).toBeUndefined();
    }
    expect(variants).toBe(3 * 63);
  });

  it("hostile: cut short, lengthened, re-labelled, malformed or oversized codes are refused", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    const code = sealer.seal(record());
    const [id, hour, body] = code.split(".") as [string, string, string];
    const otherHour = (Number.parseInt(hour, 36) + 1).toString(36);
    for (const bad of [
      "",
      ".",
      "..",
      id,
      `${id}.${hour}`,
      `${id}.${hour}.`,
      `${id}.${body}`,
      `${id}.${hour}.${body.slice(0, 20)}`,
      `${id}.${hour}.${body.slice(0, -4)}`,
      `${id}.${hour}.${body}AAAA`,
      `${"A".repeat(12)}.${hour}.${body}`,
      `${id}.${otherHour}.${body}`,
      `${id}.${hour.toUpperCase()}X.${body}`,
      `${id}.${hour}.${body}.`,
      `${id}.${hour}.${body.replace(/[A-Za-z]/, "!")}`,
      `${id}.${hour}.${"A".repeat(5000)}`,
      randomBytes(32).toString("base64url"),
    ]) {
      expect(sealer.open(bad, NOW)).toBeUndefined();
    }
  });

  it("opens only within an hour of the code's own hour; each hour seals under a key of its own", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    const code = sealer.seal(record());
    expect(sealer.open(code, NOW + HOUR)).toEqual(record());
    expect(sealer.open(code, NOW - HOUR)).toEqual(record());
    expect(sealer.open(code, NOW + 3 * HOUR)).toBeUndefined();
    expect(sealer.open(code, NOW - 3 * HOUR)).toBeUndefined();
    // A record made in the next hour is sealed under that hour's key: moving a code's body to
    // another hour's label does not open.
    const later = sealer.seal(record({ createdAt: NOW + HOUR, expiresAt: NOW + HOUR + 60_000 }));
    const [id, laterHour, laterBody] = later.split(".") as [string, string, string];
    const [, hour, body] = code.split(".") as [string, string, string];
    expect(laterHour).not.toBe(hour);
    expect(sealer.open(`${id}.${hour}.${laterBody}`, NOW)).toBeUndefined();
    expect(sealer.open(`${id}.${laterHour}.${body}`, NOW)).toBeUndefined();
  });

  it("hostile: a code of another issuer sharing the key, or of another key, is refused", () => {
    const key = kek();
    const code = createCodeSealer(ISSUER, [key])!.seal(record());
    expect(createCodeSealer("https://other.example", [key])!.open(code, NOW)).toBeUndefined();
    expect(createCodeSealer(ISSUER, [kek()])!.open(code, NOW)).toBeUndefined();
  });

  it("KEK rotation: [new, old] opens codes sealed under old and seals under new, which old alone cannot open", () => {
    const [oldKey, newKey] = [kek(), kek()];
    const before = createCodeSealer(ISSUER, [oldKey])!;
    const during = createCodeSealer(ISSUER, [newKey, oldKey])!;
    const sealedBefore = before.seal(record());
    expect(during.open(sealedBefore, NOW)).toEqual(record());
    const sealedDuring = during.seal(record());
    expect(sealedDuring.split(".")[0]).not.toBe(sealedBefore.split(".")[0]);
    expect(during.open(sealedDuring, NOW)).toEqual(record());
    expect(before.open(sealedDuring, NOW)).toBeUndefined();
  });
});

describe("code flows with sealed codes", () => {
  const CLIENT = publicClient();
  const REDIRECT = CLIENT.redirectUris[0]!;
  let server: FlowServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  /** A signed-in user's approved code for the public client. */
  async function approvedCode(s: FlowServer) {
    const agent = new Agent(s.issuer);
    return approve(agent, await signIn(agent, { clientId: CLIENT.clientId, redirectUri: REDIRECT }));
  }
  /** Whether the store holds a row for `code` (asked with a check that refuses: nothing is issued). */
  async function stored(s: FlowServer, code: string): Promise<string> {
    const refuse = () => new OAuthError("invalid_grant", { description: "probe" });
    const probe = await s.store.redeemAuthorizationCode(sha256Base64url(code), s.clock.now, refuse, () => {
      throw new Error("never issued");
    });
    return probe.status;
  }

  it("nothing is stored at /authorize; the code redeems once, and a second use is refused and revokes the grant", async () => {
    server = await startFlowServer({ clients: [CLIENT], extra: { keyEncryptionKeys: [kek()] } });
    const grant = await approvedCode(server);
    expect(grant.code).toContain(".");
    expect(await stored(server, grant.code)).toBe("not_found");
    const first = await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT);
    expect(first.status).toBe(200);
    expect(first.body.refresh_token).toBeDefined();
    const again = await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT);
    expect(again).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    // RFC 6749 §4.1.2: the tokens issued from the code are revoked.
    const refreshed = await refresh(server.issuer, CLIENT.clientId, first.body.refresh_token!);
    expect(refreshed).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
  });

  it("hostile: an altered code, or one of another server, is refused and does not spend the real one", async () => {
    server = await startFlowServer({ clients: [CLIENT], extra: { keyEncryptionKeys: [kek()] } });
    const grant = await approvedCode(server);
    const dot = grant.code.indexOf(".");
    const i = dot + 20;
    const altered = grant.code.slice(0, i) + (grant.code[i] === "A" ? "B" : "A") + grant.code.slice(i + 1);
    const foreign = createCodeSealer(server.issuer, [kek()])!.seal(record({ clientId: CLIENT.clientId }));
    for (const code of [altered, foreign, grant.code.slice(0, -10)]) {
      const r = await redeem(server.issuer, CLIENT.clientId, { ...grant, code }, REDIRECT);
      expect(r).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    }
    expect((await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT)).status).toBe(200);
  });

  it("hostile: another spelling of a redeemed code (its last character's unused bits changed) issues nothing", async () => {
    server = await startFlowServer({ clients: [CLIENT], extra: { keyEncryptionKeys: [kek()] } });
    const s = server;
    // Of two codes whose records are one byte apart, at least one has a length that is not a
    // multiple of 3 bytes, so its last character carries unused bits.
    let tried = 0;
    for (const scope of ["notes:read", "notes:write"]) {
      const agent = new Agent(s.issuer);
      const grant = await approve(
        agent,
        await signIn(agent, { clientId: CLIENT.clientId, redirectUri: REDIRECT, scope }),
      );
      const head = grant.code.slice(0, -1);
      const last = Buffer.from(grant.code.slice(grant.code.lastIndexOf(".") + 1), "base64url");
      const twin = [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"]
        .map((ch) => head + ch)
        .find(
          (c) => c !== grant.code && Buffer.from(c.slice(c.lastIndexOf(".") + 1), "base64url").equals(last),
        );
      if (twin === undefined) continue;
      tried++;
      expect((await redeem(s.issuer, CLIENT.clientId, grant, REDIRECT)).status).toBe(200);
      const again = await redeem(s.issuer, CLIENT.clientId, { ...grant, code: twin }, REDIRECT);
      expect(again).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    }
    expect(tried).toBeGreaterThan(0);
  });

  it("an expired sealed code is refused (the sealed expiry counts, nothing else knows the code)", async () => {
    server = await startFlowServer({ clients: [CLIENT], extra: { keyEncryptionKeys: [kek()] } });
    const grant = await approvedCode(server);
    server.clock.now += 61_000;
    const r = await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT);
    expect(r).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect(await stored(server, grant.code)).toBe("not_found");
  });

  it("a wrong PKCE verifier is refused and spends the code, as for a stored one", async () => {
    server = await startFlowServer({ clients: [CLIENT], extra: { keyEncryptionKeys: [kek()] } });
    const grant = await approvedCode(server);
    const wrong = await redeem(
      server.issuer,
      CLIENT.clientId,
      { ...grant, verifier: "x".repeat(43) },
      REDIRECT,
    );
    expect(wrong).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    const right = await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT);
    expect(right).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
  });

  it("without key-encryption keys the code is 256 random bits, stored at issue", async () => {
    server = await startFlowServer({ clients: [CLIENT] });
    const grant = await approvedCode(server);
    expect(grant.code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(await stored(server, grant.code)).toBe("refused");
  });
});
