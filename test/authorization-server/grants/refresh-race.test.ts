/**
 * Refresh races of real clients (issue 21): several processes or windows of one client refresh with
 * the same refresh token at once. The rule (refresh-policy.ts `reuseGraceMs`, storage/rules.ts
 * `isRefreshTokenReuse`): a rotated token stays redeemable until one of its successors is used, or
 * for the grace window, whichever ends first; a redemption inside it gets a sibling successor. A
 * rotated token presented after a successor was used is a stolen one (RFC 9700 §4.14.2) and ends
 * the grant. Grace never extends the grant's lifetimes.
 */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Base64url } from "../../../src/shared/crypto.js";
import type { AuthorizationStore } from "../../../src/storage/contract.js";
import { obtainCode, redeemCode, refreshGrant, tokenSet } from "../../support/flow.js";
import { type InProcessServer, serveInProcess, testFlow } from "../../support/in-process.js";
import { CLIENT_ID, createBackend, createUsers, testClient } from "../../support/instances.js";
import { codeTokens, makeServer, PUBLIC_CLIENT, postToken, type TestServer } from "../helpers.js";

const CHILD = fileURLToPath(new URL("./refresh-race-child.mjs", import.meta.url));

function refresh(t: TestServer, token: string) {
  return postToken(t, { grant_type: "refresh_token", refresh_token: token, client_id: PUBLIC_CLIENT });
}

async function stored(t: TestServer, token: string) {
  return t.store.getRefreshToken(sha256Base64url(token));
}

describe("refresh races on the memory store (default options)", () => {
  it("a rotated token presented again before its successor is used gets a sibling; both chains live on", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const a = await refresh(t, first.refresh_token as string);
    t.clock.advance(5);
    const b = await refresh(t, first.refresh_token as string);
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(b.body.refresh_token).not.toBe(a.body.refresh_token);
    expect((await refresh(t, a.body.refresh_token as string)).status).toBe(200);
    expect((await refresh(t, b.body.refresh_token as string)).status).toBe(200);
    expect(t.log.lines.some((l) => l.event === "refresh_token_reused")).toBe(false);
  });

  it("a stolen token used after the legitimate client used its successor revokes the grant, inside the window too", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const legit = await refresh(t, first.refresh_token as string);
    t.clock.advance(1);
    const moved = await refresh(t, legit.body.refresh_token as string);
    expect(moved.status).toBe(200);
    t.clock.advance(1);
    const thief = await refresh(t, first.refresh_token as string);
    expect(thief.status).toBe(400);
    expect(thief.body.error).toBe("invalid_grant");
    expect(thief.body.refresh_token).toBeUndefined();
    // The whole grant ended: the legitimate client's newest token is dead too.
    expect((await refresh(t, moved.body.refresh_token as string)).body.error).toBe("invalid_grant");
    expect(t.log.lines.some((l) => l.event === "refresh_token_reused")).toBe(true);
  });

  it("a sibling's successor used closes the window of the token both came from", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    await refresh(t, first.refresh_token as string);
    const sibling = await refresh(t, first.refresh_token as string);
    expect(sibling.status).toBe(200);
    expect((await refresh(t, sibling.body.refresh_token as string)).status).toBe(200);
    expect((await refresh(t, first.refresh_token as string)).body.error).toBe("invalid_grant");
  });

  it("after the window a rotated token whose successor was never used still revokes the grant", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const next = await refresh(t, first.refresh_token as string);
    t.clock.advance(30);
    expect((await refresh(t, first.refresh_token as string)).body.error).toBe("invalid_grant");
    expect((await refresh(t, next.body.refresh_token as string)).body.error).toBe("invalid_grant");
  });

  it("grace never extends the idle lifetime: a sibling expires when the first successor does", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const a = await refresh(t, first.refresh_token as string);
    t.clock.advance(20);
    const b = await refresh(t, first.refresh_token as string);
    expect(b.status).toBe(200);
    const successor = await stored(t, a.body.refresh_token as string);
    const sibling = await stored(t, b.body.refresh_token as string);
    expect(sibling?.expiresAt).toBe(successor?.expiresAt);
  });

  it("grace never extends the absolute lifetime: past the grant's end the window gives nothing", async () => {
    const t = await makeServer({
      refreshTokens: { idleTtlSeconds: 60, absoluteTtlSeconds: 60 },
    });
    const first = await codeTokens(t);
    const grantId = (await stored(t, first.refresh_token as string))!.grantId;
    const grantEnd = (await t.store.getGrant(grantId))!.expiresAt;
    t.clock.advance(50);
    const a = await refresh(t, first.refresh_token as string);
    expect(a.status).toBe(200);
    t.clock.advance(5);
    const b = await refresh(t, first.refresh_token as string);
    expect(b.status).toBe(200);
    expect((await stored(t, b.body.refresh_token as string))!.expiresAt).toBeLessThanOrEqual(grantEnd);
    t.clock.now = grantEnd;
    const late = await refresh(t, first.refresh_token as string);
    expect(late.body.error).toBe("invalid_grant");
    expect(late.body.refresh_token).toBeUndefined();
  });

  it("reuseGraceSeconds: 0 restores strict reuse detection for public clients", async () => {
    const t = await makeServer({ refreshTokens: { reuseGraceSeconds: 0 } });
    const first = await codeTokens(t);
    expect((await refresh(t, first.refresh_token as string)).status).toBe(200);
    expect((await refresh(t, first.refresh_token as string)).body.error).toBe("invalid_grant");
  });
});

/** Runs the child script: it waits for its line on stdin, refreshes once, and prints what it got. */
function childRefresher(): {
  go(line: string): void;
  result: Promise<{ status: number; error?: string; refresh_token?: string; access_token?: string }>;
} {
  const child = spawn(process.execPath, [CHILD], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString("utf8");
  });
  child.stderr.on("data", (chunk: Buffer) => {
    err += chunk.toString("utf8");
  });
  const result = new Promise<{ status: number; error?: string; refresh_token?: string }>(
    (resolve, reject) => {
      child.on("exit", (code) => {
        if (code === 0) resolve(JSON.parse(out));
        else reject(new Error(`refresher exited ${code}: ${err.slice(0, 300)}`));
      });
    },
  );
  return { go: (line) => child.stdin.end(`${line}\n`), result };
}

describe.each(["SQLite", "PostgreSQL"] as const)("refresh races on %s (default options)", (name) => {
  let backend: { store: AuthorizationStore; cleanup(): Promise<void> };
  let served: InProcessServer;
  let username: string;

  beforeAll(async () => {
    backend = await createBackend(name, "race");
    await backend.store.migrate();
    await backend.store.createClient(testClient());
    [username] = (await createUsers(backend.store, "race", 1)) as [string];
    served = await serveInProcess(backend.store);
  }, 60_000);

  afterAll(async () => {
    await served?.close();
    await backend?.cleanup();
  });

  async function login() {
    const base = served.http.url;
    const flow = testFlow(() => base, username);
    return tokenSet(await redeemCode(base, flow, await obtainCode(flow)));
  }

  it("50 parallel refreshes of one token: no revocation, every answer usable", async () => {
    const base = served.http.url;
    const first = await login();
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => refreshGrant(base, CLIENT_ID, first.refresh_token!)),
    );
    const bodies = await Promise.all(answers.map((r) => r.json() as Promise<Record<string, string>>));
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 200));
    const tokens = bodies.map((b) => b.refresh_token!);
    expect(new Set(tokens).size).toBe(50);
    // Every chain continues: each answered refresh token refreshes in turn.
    const next = await Promise.all(tokens.map((token) => refreshGrant(base, CLIENT_ID, token)));
    expect(next.map((r) => r.status)).toEqual(next.map(() => 200));
    const grantId = (await backend.store.getRefreshToken(sha256Base64url(first.refresh_token!)))!.grantId;
    expect((await backend.store.getGrant(grantId))?.revokedAt).toBeUndefined();
    // The chains moved on, so the first token is now a stolen one: the grant ends.
    expect((await refreshGrant(base, CLIENT_ID, first.refresh_token!)).status).toBe(400);
    expect((await backend.store.getGrant(grantId))?.revokedAt).toBeDefined();
  }, 60_000);

  it("with instance clocks 2 s apart: a race across them gets tokens, a replay after the successor's use revokes", async () => {
    const base = served.http.url;
    const behind = await serveInProcess(backend.store, { now: () => Date.now() - 2000 });
    try {
      const first = await login();
      const a = await tokenSet(await refreshGrant(base, CLIENT_ID, first.refresh_token!));
      // Rotated on the instance ahead, presented on the one behind (a negative elapsed time).
      const b = await tokenSet(await refreshGrant(behind.http.url, CLIENT_ID, first.refresh_token!));
      expect(b.refresh_token).not.toBe(a.refresh_token);
      // The successor is used on the instance behind; the first token on the one ahead is reuse.
      expect((await refreshGrant(behind.http.url, CLIENT_ID, a.refresh_token!)).status).toBe(200);
      expect((await refreshGrant(base, CLIENT_ID, first.refresh_token!)).status).toBe(400);
      expect((await refreshGrant(behind.http.url, CLIENT_ID, b.refresh_token!)).status).toBe(400);
    } finally {
      await behind.close();
    }
  }, 60_000);

  it("two client processes refreshing one token at once both stay logged in", async () => {
    const base = served.http.url;
    const first = await login();
    const processes = [childRefresher(), childRefresher()];
    const line = JSON.stringify({ base, clientId: CLIENT_ID, refreshToken: first.refresh_token });
    for (const p of processes) p.go(line);
    const results = await Promise.all(processes.map((p) => p.result));
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    for (const r of results) {
      const again = await refreshGrant(base, CLIENT_ID, r.refresh_token!);
      expect(again.status).toBe(200);
    }
  }, 60_000);
});
