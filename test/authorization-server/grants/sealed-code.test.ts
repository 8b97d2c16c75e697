/**
 * Sealed authorization codes (grants/sealed-code.ts): the sealer on its own (round trip, nothing
 * readable, every alteration refused, other issuers and keys refused, KEK rotation, bounded input)
 * and whole flows on a real server with key-encryption keys (nothing stored before redemption,
 * single use with revocation on replay, tampered, foreign and expired codes refused without
 * spending the real one, a refused verifier spending it), and without keys (codes stored as before).
 */
import { createCipheriv, createHash, hkdfSync, randomBytes } from "node:crypto";
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
  RESOURCE,
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

/** The format-1 code of `r`, as the release before issue 25 sealed it (its wire format, copied here). */
function sealFormat1(issuer: string, key: string, r: SealedCodeRecord): string {
  const kekBytes = Buffer.from(key, "base64url");
  const kekId = createHash("sha256")
    .update("gatehouse key-encryption key id\0")
    .update(kekBytes)
    .digest()
    .subarray(0, 9)
    .toString("base64url");
  const codeKey = Buffer.from(
    hkdfSync("sha256", kekBytes, "", `gatehouse authorization code v1\0${issuer}`, 32),
  );
  const hour = Math.floor(r.createdAt / HOUR).toString(36);
  const hourKey = Buffer.from(hkdfSync("sha256", codeKey, "", `hour ${hour}`, 32));
  const nonce = randomBytes(12);
  const cipher = createCipheriv("aes-256-gcm", hourKey, nonce, { authTagLength: 16 });
  cipher.setAAD(Buffer.from("gatehouse authorization code v1"));
  const plaintext = JSON.stringify([
    1,
    r.grantId,
    r.clientId,
    r.userId,
    r.redirectUri,
    r.redirectUriSent ? 1 : 0,
    r.scopes,
    r.resource,
    r.codeChallenge,
    r.refreshAllowed ? 1 : 0,
    r.sessionHash ?? null,
    r.dpopJkt ?? null,
    r.createdAt,
    r.expiresAt,
  ]);
  const body = Buffer.concat([nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  return `${kekId}.${hour}.${body.toString("base64url")}`;
}

/** A format-2 code with its bytes changed by `change` (version at 0, KEK id 1-9, hour 10-12). */
function rewrite(code: string, change: (bytes: Buffer) => Buffer | undefined): string {
  const bytes = Buffer.from(code, "base64url");
  return (change(bytes) ?? bytes).toString("base64url");
}

/** Records whose members take every path of format 2's encoding (text, raw bytes, sortable id). */
function edgeRecords(): SealedCodeRecord[] {
  const bare = record({ redirectUriSent: false, refreshAllowed: false, scopes: [] });
  delete bare.sessionHash;
  delete bare.dpopJkt;
  const hourStart = Math.floor(NOW / HOUR) * HOUR;
  return [
    record(),
    bare,
    // The last character of a 43-character challenge carries 2 unused bits: this one sets them.
    record({ codeChallenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cN" }),
    record({ userId: "üser 1", clientId: "client with spaces", scopes: ["", "é", "a:b"] }),
    record({
      redirectUri: `https://app.example/${"x".repeat(1500)}`,
      resource: `https://r.example/${"é".repeat(40)}`,
    }),
    record({ grantId: "g" }),
    record({ grantId: `0MHV3K2A1${randomBytes(16).toString("base64url")}` }),
    record({ grantId: "0mhv3k2a1AAAAAAAAAAAAAAAAAAAAB" }),
    record({ grantId: `0mhv3k2a1${randomBytes(16).toString("base64url")}` }),
    record({ createdAt: hourStart, expiresAt: hourStart }),
    record({ createdAt: hourStart + HOUR - 1, expiresAt: hourStart + HOUR + 59_999 }),
    record({
      userId: randomBytes(16).toString("base64url"),
      clientId: randomBytes(16).toString("base64url"),
    }),
  ];
}

describe("the code sealer", () => {
  it("opens what it sealed, every member as it was (optional members absent stay absent)", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    for (const r of edgeRecords()) {
      expect(sealer.open(sealer.seal(r), r.createdAt)).toEqual(r);
      // A code sealed by the previous release (format 1) opens to the same record.
      expect(sealer.open(sealFormat1(ISSUER, key, r), r.createdAt)).toEqual(r);
    }
  });

  it("refuses to seal a record format 2 cannot hold (a negative lifetime, a time that is not whole ms)", () => {
    const sealer = createCodeSealer(ISSUER, [kek()])!;
    expect(() => sealer.seal(record({ expiresAt: NOW - 1 }))).toThrow(RangeError);
    expect(() => sealer.seal(record({ createdAt: NOW + 0.5 }))).toThrow(RangeError);
  });

  it("no sealer without key-encryption keys (codes are then stored)", () => {
    expect(createCodeSealer(ISSUER, undefined)).toBeUndefined();
    expect(createCodeSealer(ISSUER, [])).toBeUndefined();
  });

  it("the code says nothing of its record, neither as text nor as bytes; shorter than format 1; two codes of one record differ", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    for (const r of edgeRecords()) {
      const code = sealer.seal(r);
      expect(code).toMatch(/^[A-Za-z0-9_-]+$/);
      const bytes = Buffer.from(code, "base64url");
      const members = [
        r.grantId,
        r.grantId.slice(9),
        r.userId,
        r.clientId,
        r.redirectUri,
        r.resource,
        r.codeChallenge,
        r.sessionHash,
        r.dpopJkt,
        ...r.scopes,
      ].filter((m): m is string => m !== undefined && m.length >= 8);
      for (const member of members) {
        expect(code).not.toContain(member);
        expect(bytes.includes(Buffer.from(member, "utf8"))).toBe(false);
        // Format 2 keeps base64url members as their bytes: those are not in the clear either.
        expect(bytes.includes(Buffer.from(member, "base64url"))).toBe(false);
      }
      expect(sealer.seal(r)).not.toBe(code);
    }
    const r = record();
    expect(sealer.seal(r).length).toBeLessThan(0.85 * sealFormat1(ISSUER, key, r).length);
  });

  it("hostile: every one-character change of a code is refused (format 2 and format 1)", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    for (const code of [sealer.seal(record()), sealFormat1(ISSUER, key, record())]) {
      let refused = 0;
      for (let i = 0; i < code.length; i++) {
        if (code[i] === ".") continue;
        const swapped = code[i] === "A" ? "B" : "A";
        const altered = code.slice(0, i) + swapped + code.slice(i + 1);
        // Also the last character, whose unused bits decode to the same bytes: one spelling opens.
        expect(sealer.open(altered, NOW)).toBeUndefined();
        refused++;
      }
      expect(refused).toBeGreaterThan(300);
    }
  });

  it("hostile: a code opens under one spelling only (no other last character, no base64 alphabet, no padding)", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    // A body whose length is not a multiple of 3 bytes leaves unused bits in the last character;
    // records one byte apart cover both such lengths.
    let variants = 0;
    for (const seal of [
      (r: SealedCodeRecord) => sealer.seal(r),
      (r: SealedCodeRecord) => sealFormat1(ISSUER, key, r),
    ]) {
      for (const grantId of ["g", "gg", "ggg"]) {
        const code = seal(record({ grantId }));
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
    }
    expect(variants).toBe(2 * 3 * 63);
  });

  it("hostile: cut short, lengthened, re-labelled, malformed or oversized codes are refused (format 2)", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    const code = sealer.seal(record());
    const hour = Math.floor(NOW / HOUR);
    for (const bad of [
      "",
      ".",
      "A",
      code.slice(0, 20),
      code.slice(0, 76),
      code.slice(0, -4),
      code.slice(4),
      `${code}AAAA`,
      `${code}.`,
      `.${code}`,
      code.replace(/[A-Za-z]/, "!"),
      rewrite(code, (b) => {
        b[0] = 1;
        return b;
      }),
      rewrite(code, (b) => {
        b[0] = 3;
        return b;
      }),
      rewrite(code, (b) => {
        b[5] = (b[5]! + 1) % 256;
        return b;
      }),
      rewrite(code, (b) => {
        b.writeUIntBE(hour + 1, 10, 3);
        return b;
      }),
      rewrite(code, (b) => Buffer.concat([b, Buffer.alloc(1)])),
      rewrite(code, (b) => b.subarray(0, b.length - 1)),
      rewrite(code, (b) => b.subarray(0, 13 + 12 + 16)),
      `${code}${"A".repeat(4097 - code.length)}`,
      "A".repeat(5000),
      // A stored code's shape: 256 random bits.
      randomBytes(32).toString("base64url"),
      Buffer.concat([Buffer.from([2]), randomBytes(60)]).toString("base64url"),
    ]) {
      expect(sealer.open(bad, NOW)).toBeUndefined();
    }
  });

  it("hostile: cut short, lengthened, re-labelled, malformed or oversized format-1 codes are refused", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    const code = sealFormat1(ISSUER, key, record());
    expect(sealer.open(code, NOW)).toEqual(record());
    const [id, hour, body] = code.split(".") as [string, string, string];
    const otherHour = (Number.parseInt(hour, 36) + 1).toString(36);
    for (const bad of [
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
      `${id}.0${hour}.${body}`,
      `${id}.${hour.toUpperCase()}X.${body}`,
      `${id}.${hour}.${body}.`,
      `${id}.${hour}.${body.replace(/[A-Za-z]/, "!")}`,
      `${id}.${hour}.${"A".repeat(5000)}`,
    ]) {
      expect(sealer.open(bad, NOW)).toBeUndefined();
    }
  });

  it("opens only within an hour of the code's own hour; each hour seals under a key of its own", () => {
    const key = kek();
    const sealer = createCodeSealer(ISSUER, [key])!;
    for (const code of [sealer.seal(record()), sealFormat1(ISSUER, key, record())]) {
      expect(sealer.open(code, NOW + HOUR)).toEqual(record());
      expect(sealer.open(code, NOW - HOUR)).toEqual(record());
      expect(sealer.open(code, NOW + 3 * HOUR)).toBeUndefined();
      expect(sealer.open(code, NOW - 3 * HOUR)).toBeUndefined();
    }
    // A record made in the next hour is sealed under that hour's key: moving a code's body to
    // another hour's label does not open.
    const code = sealer.seal(record());
    const later = sealer.seal(record({ createdAt: NOW + HOUR, expiresAt: NOW + HOUR + 60_000 }));
    const [head, laterHead] = [code, later].map((c) => Buffer.from(c, "base64url").subarray(0, 13));
    expect(head!.equals(laterHead!)).toBe(false);
    const swapHeads = (c: string, h: Buffer) =>
      rewrite(c, (b) => {
        h.copy(b, 0);
        return b;
      });
    expect(sealer.open(swapHeads(later, head!), NOW)).toBeUndefined();
    expect(sealer.open(swapHeads(code, laterHead!), NOW)).toBeUndefined();
  });

  it("hostile: a code of another issuer sharing the key, or of another key, is refused (both formats)", () => {
    const key = kek();
    for (const code of [
      createCodeSealer(ISSUER, [key])!.seal(record()),
      sealFormat1(ISSUER, key, record()),
    ]) {
      expect(createCodeSealer("https://other.example", [key])!.open(code, NOW)).toBeUndefined();
      expect(createCodeSealer(ISSUER, [kek()])!.open(code, NOW)).toBeUndefined();
    }
  });

  it("KEK rotation: [new, old] opens codes sealed under old (both formats) and seals under new, which old alone cannot open", () => {
    const [oldKey, newKey] = [kek(), kek()];
    const before = createCodeSealer(ISSUER, [oldKey])!;
    const during = createCodeSealer(ISSUER, [newKey, oldKey])!;
    const sealedBefore = before.seal(record());
    expect(during.open(sealedBefore, NOW)).toEqual(record());
    expect(during.open(sealFormat1(ISSUER, oldKey, record()), NOW)).toEqual(record());
    const sealedDuring = during.seal(record());
    const kekId = (c: string) => Buffer.from(c, "base64url").subarray(1, 10).toString("hex");
    expect(kekId(sealedDuring)).not.toBe(kekId(sealedBefore));
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
    expect(grant.code).toMatch(/^[A-Za-z0-9_-]{100,}$/);
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
    const i = 20;
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

  it("a format-1 code (sealed by the previous release before an upgrade) redeems once", async () => {
    const key = kek();
    server = await startFlowServer({ clients: [CLIENT], extra: { keyEncryptionKeys: [key] } });
    const verifier = randomBytes(32).toString("base64url");
    const now = server.clock.now;
    const code = sealFormat1(
      server.issuer,
      key,
      record({
        grantId: `${now.toString(36).padStart(9, "0")}${randomBytes(16).toString("base64url")}`,
        clientId: CLIENT.clientId,
        userId: "u1",
        redirectUri: REDIRECT,
        scopes: ["notes:read", "offline_access"],
        resource: RESOURCE,
        codeChallenge: sha256Base64url(verifier),
        dpopJkt: undefined,
        createdAt: now,
        expiresAt: now + 60_000,
      }),
    );
    const grant = { code, verifier, location: new URL(REDIRECT) };
    const first = await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT);
    expect(first.status).toBe(200);
    expect(first.body.refresh_token).toBeDefined();
    const again = await redeem(server.issuer, CLIENT.clientId, grant, REDIRECT);
    expect(again).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
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
