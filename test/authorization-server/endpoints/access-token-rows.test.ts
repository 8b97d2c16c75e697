/**
 * Access tokens without a row per issuance (issue 25, docs/storage.md): issuance writes no
 * access-token row; introspection (RFC 7662 §2.2) judges a token by its signature, `typ`, `iss` and
 * `exp`, its grant (named in its `jti`) still live and its `jti` not on the revoked list, which only
 * a revocation (RFC 7009 §2.1) writes. A token issued before the change (a `jti` without a grant id,
 * with its row) keeps working. Run on SQLite, so the rows can be counted.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { importJWK, SignJWT } from "jose";
import { afterAll, describe, expect, it } from "vitest";
import { randomToken } from "../../../src/shared/crypto.js";
import { createSqliteStore, type SqliteStore } from "../../../src/storage/sqlite/index.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  codeTokens,
  decodePayload,
  formRequest,
  ISSUER,
  makeServer,
  PUBLIC_CLIENT,
  postToken,
  RESOURCE,
  RS_CLIENT,
  RS_SECRET,
  type TestServer,
} from "../helpers.js";

const dir = mkdtempSync(join(tmpdir(), "gatehouse-access-rows-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function sqliteServer(): Promise<TestServer & { sqlite: SqliteStore }> {
  const sqlite = createSqliteStore({ path: join(dir, `${randomToken(6)}.db`) });
  await sqlite.migrate();
  return { ...(await makeServer({ store: sqlite })), sqlite };
}

function accessRows(sqlite: SqliteStore): number {
  return (sqlite.database.prepare("SELECT count(*) AS n FROM access_tokens").get() as { n: number }).n;
}

async function active(t: TestServer, token: string): Promise<boolean> {
  const r = await t.server.fetch(
    formRequest("/introspect", { token, client_id: RS_CLIENT, client_secret: RS_SECRET }),
  );
  expect(r.status).toBe(200);
  return ((await r.json()) as { active: boolean }).active;
}

async function revoke(t: TestServer, token: string): Promise<void> {
  const r = await t.server.fetch(
    formRequest("/revoke", { token, token_type_hint: "access_token", client_id: PUBLIC_CLIENT }),
  );
  expect(r.status).toBe(200);
}

async function refresh(t: TestServer, refreshToken: string): Promise<Record<string, unknown>> {
  const r = await postToken(t, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: PUBLIC_CLIENT,
  });
  expect(r.status).toBe(200);
  return r.body;
}

describe("access tokens without a row per issuance", () => {
  it("a code flow, a refresh and client_credentials write no access-token row; the jti names the grant", async () => {
    const t = await sqliteServer();
    const first = await codeTokens(t);
    const second = await refresh(t, first.refresh_token as string);
    const machine = await postToken(
      t,
      { grant_type: "client_credentials", resource: RESOURCE, scope: "notes:read" },
      basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
    );
    expect(machine.status).toBe(200);
    expect(accessRows(t.sqlite)).toBe(0);
    const grants = await t.store.listGrants();
    const grantOf = (token: unknown) => (decodePayload(token as string).jti as string).split(".")[0];
    expect(grantOf(first.access_token)).toBe(grantOf(second.access_token));
    expect(grants.map((g) => g.grantId)).toContain(grantOf(first.access_token));
    expect(grants.map((g) => g.grantId)).toContain(grantOf(machine.body.access_token));
    for (const token of [first.access_token, second.access_token, machine.body.access_token]) {
      expect(await active(t, token as string)).toBe(true);
    }
  });

  it("a revoked access token is inactive, the other tokens of its grant stay active; one row, on the revoked list", async () => {
    const t = await sqliteServer();
    const first = await codeTokens(t);
    const second = await refresh(t, first.refresh_token as string);
    await revoke(t, first.access_token as string);
    expect(await active(t, first.access_token as string)).toBe(false);
    expect(await active(t, second.access_token as string)).toBe(true);
    expect(accessRows(t.sqlite)).toBe(1);
    const jti = decodePayload(first.access_token as string).jti as string;
    expect((await t.store.getAccessToken(jti))?.revokedAt).toBeDefined();
    // The purge keeps the entry while its token lives, and deletes it once it has expired.
    await t.store.purgeExpired(t.clock.now);
    expect(accessRows(t.sqlite)).toBe(1);
    await t.store.purgeExpired((decodePayload(first.access_token as string).exp as number) * 1000);
    expect(accessRows(t.sqlite)).toBe(0);
  });

  it("a token of another client is not revoked by it", async () => {
    const t = await sqliteServer();
    const tokens = await codeTokens(t);
    const r = await t.server.fetch(
      formRequest(
        "/revoke",
        { token: tokens.access_token as string },
        basic(CONFIDENTIAL_CLIENT, CONFIDENTIAL_SECRET),
      ),
    );
    expect(r.status).toBe(200);
    expect(accessRows(t.sqlite)).toBe(0);
    expect(await active(t, tokens.access_token as string)).toBe(true);
  });

  it("revoking the grant makes every access token of it inactive at once", async () => {
    const t = await sqliteServer();
    const first = await codeTokens(t);
    const second = await refresh(t, first.refresh_token as string);
    const r = await t.server.fetch(
      formRequest("/revoke", { token: second.refresh_token as string, client_id: PUBLIC_CLIENT }),
    );
    expect(r.status).toBe(200);
    expect(await active(t, first.access_token as string)).toBe(false);
    expect(await active(t, second.access_token as string)).toBe(false);
    expect(accessRows(t.sqlite)).toBe(0);
  });

  it("a token of another server (same issuer, other keys) and a forged signature are inactive", async () => {
    const t = await sqliteServer();
    const other = await makeServer();
    const foreign = await codeTokens(other);
    expect(await active(other, foreign.access_token as string)).toBe(true);
    expect(await active(t, foreign.access_token as string)).toBe(false);
    // A token of this server whose payload names another grant: the signature no longer verifies.
    const mine = await codeTokens(t);
    const victim = await codeTokens(t);
    const [header, payload, signature] = (mine.access_token as string).split(".");
    const claims = JSON.parse(Buffer.from(payload!, "base64url").toString("utf8")) as Record<string, unknown>;
    claims.jti = decodePayload(victim.access_token as string).jti;
    const forged = `${header}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${signature}`;
    expect(await active(t, forged)).toBe(false);
  });

  it("a token issued before the change (jti without a grant id, with its row) keeps working, is revoked and steps up", async () => {
    const t = await sqliteServer();
    const tokens = await codeTokens(t);
    const grantId = (decodePayload(tokens.access_token as string).jti as string).split(".")[0]!;
    // What the previous release wrote: a row per token and a jti that names nothing.
    const jti = `old${randomToken(12)}`;
    const now = t.clock.now;
    t.sqlite.database
      .prepare(
        `INSERT INTO access_tokens (jti, grant_id, client_id, user_id, scopes, resource, created_at, expires_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        jti,
        grantId,
        PUBLIC_CLIENT,
        "alice",
        JSON.stringify(["notes:read"]),
        RESOURCE,
        now,
        now + 300_000,
      );
    const [key] = await t.store.listSigningKeys();
    const old = await new SignJWT({
      sub: "alice",
      client_id: PUBLIC_CLIENT,
      aud: RESOURCE,
      scope: "notes:read",
      jti,
      iat: Math.floor(now / 1000),
      exp: Math.floor(now / 1000) + 300,
      iss: ISSUER,
    })
      .setProtectedHeader({ alg: key!.alg, typ: "at+jwt", kid: key!.kid })
      .sign(await importJWK(key!.privateJwk, key!.alg));
    expect(await active(t, old)).toBe(true);
    expect(await t.server.requestStepUp(jti)).toBe(true);
    expect((await t.store.getGrant(grantId))?.stepUpRequestedAt).toBe(now);
    // Without its row such a jti names no grant: inactive.
    const orphan = await new SignJWT({ ...decodePayload(old), jti: `old${randomToken(12)}` })
      .setProtectedHeader({ alg: key!.alg, typ: "at+jwt", kid: key!.kid })
      .sign(await importJWK(key!.privateJwk, key!.alg));
    expect(await active(t, orphan)).toBe(false);
    await revoke(t, old);
    expect(await active(t, old)).toBe(false);
    expect(await active(t, tokens.access_token as string)).toBe(true);
  });

  it("requestStepUp finds the grant from the jti alone", async () => {
    const t = await sqliteServer();
    const tokens = await codeTokens(t);
    const jti = decodePayload(tokens.access_token as string).jti as string;
    expect(await t.server.requestStepUp(jti)).toBe(true);
    expect((await t.store.getGrant(jti.split(".")[0]!))?.stepUpRequestedAt).toBe(t.clock.now);
  });
});
