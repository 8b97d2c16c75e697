/**
 * Power loss (issue 25): every answer a client received survives a power cut.
 *
 * `gatehouse serve` runs on SQLite under the power-cut shim (./power-cut/shim.c: an undo record of
 * each write to the database and its WAL, discarded for what an fsync covered). Concurrent clients
 * run code flows (each user's next flow superseding its previous grant) and refreshes; at a random
 * moment the process is SIGKILLed and every write it did not fsync is reverted (the power cut). A
 * server restarted on what is left must then honour everything the clients were answered: each
 * access token received introspects active, each refresh token last received redeems, and
 * `PRAGMA integrity_check` is ok.
 *
 * Pass on the default durability (synchronous = NORMAL with the store's own WAL fsync,
 * src/storage/sqlite/wal-sync.ts) and on FULL; the broken build (NORMAL without that fsync) must be
 * caught, and is, every run. A failed fsync (EIO through the shim): no answer is released that
 * the cut then takes back, and the store refuses every request after it.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Base64url } from "../../src/shared/crypto.js";
import { createSqliteStore } from "../../src/storage/sqlite/index.js";
import { Browser, obtainCode, redeemCode, refreshGrant, type TokenSet } from "../support/flow.js";
import { testFlow } from "../support/in-process.js";
import { CLIENT_ID, createUsers, testClient } from "../support/instances.js";
import {
  compileShim,
  type Durability,
  type PoweredServer,
  restoreAfterPowerCut,
  startServer,
} from "./power-cut/power-cut.js";

const WORKERS = 6;
const ROUNDS = 3;
const REFRESHES_PER_FLOW = 4;
const INTROSPECTOR = "power-loss-rs";
const INTROSPECTOR_SECRET = randomBytes(24).toString("base64url");

const root = mkdtempSync(join(tmpdir(), "gatehouse-power-"));
let shim: string;

beforeAll(async () => {
  shim = await compileShim(root);
}, 60_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What one client holds: the answers it received, for the chain (grant) it currently uses. */
interface Chain {
  accessTokens: string[];
  refreshToken: string;
}
interface Client {
  chain?: Chain;
  /** A code redemption was sent and not answered: the chain may be superseded, or not. */
  uncertain: boolean;
  answers: number;
}

/** A fresh database with the public test client, an introspecting resource server and users. */
async function seed(dataDir: string): Promise<string[]> {
  const store = createSqliteStore({ path: join(dataDir, "gatehouse.sqlite") });
  await store.migrate();
  await store.createClient(testClient());
  await store.createClient({
    clientId: INTROSPECTOR,
    source: "preregistered",
    clientName: "Power-loss resource server",
    redirectUris: [],
    grantTypes: ["client_credentials"],
    responseTypes: [],
    tokenEndpointAuthMethod: "client_secret_post",
    clientSecretHash: sha256Base64url(INTROSPECTOR_SECRET),
    metadata: {},
    createdAt: Date.now(),
  });
  const users = await createUsers(store, "power", WORKERS);
  await store.close();
  return users;
}

/** One client's load until `stopped`: a code flow, a few refreshes, the next flow, ... */
async function drive(server: PoweredServer, username: string, client: Client, stopped: () => boolean) {
  const browser = new Browser();
  const flow = { ...testFlow(() => server.base, username), browser };
  try {
    while (!stopped()) {
      const obtained = await obtainCode(flow);
      client.uncertain = true;
      const redeemed = await redeemCode(server.base, flow, obtained);
      if (redeemed.status !== 200) throw new Error(`redemption answered ${redeemed.status}`);
      const tokens = (await redeemed.json()) as TokenSet;
      // Answered: this grant superseded the previous one, so only it is owed from now on.
      client.chain = { accessTokens: [tokens.access_token], refreshToken: tokens.refresh_token! };
      client.uncertain = false;
      client.answers++;
      for (let i = 0; i < REFRESHES_PER_FLOW && !stopped(); i++) {
        const refreshed = await refreshGrant(server.base, CLIENT_ID, client.chain.refreshToken);
        if (refreshed.status !== 200) throw new Error(`refresh answered ${refreshed.status}`);
        const next = (await refreshed.json()) as TokenSet;
        client.chain.accessTokens.push(next.access_token);
        client.chain.refreshToken = next.refresh_token!;
        client.answers++;
      }
    }
  } catch (error) {
    // The power cut ends the load with failed requests; anything else before it is a test failure.
    if (!stopped()) throw error;
  }
}

interface Verdict {
  checked: number;
  lost: string[];
}

/** A restarted server honours every answer the clients received. */
async function verify(dataDir: string, clients: Client[]): Promise<Verdict> {
  const db = new Database(join(dataDir, "gatehouse.sqlite"));
  try {
    expect(db.pragma("integrity_check", { simple: true })).toBe("ok");
  } finally {
    db.close();
  }
  const server = await startServer({ dataDir, durability: "full" });
  const lost: string[] = [];
  let checked = 0;
  try {
    for (const [n, client] of clients.entries()) {
      if (!client.chain || client.uncertain) continue;
      for (const accessToken of client.chain.accessTokens) {
        const introspected = await fetch(`${server.base}/introspect`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            token: accessToken,
            client_id: INTROSPECTOR,
            client_secret: INTROSPECTOR_SECRET,
          }).toString(),
        });
        expect(introspected.status).toBe(200);
        const body = (await introspected.json()) as { active: boolean };
        checked++;
        if (!body.active) lost.push(`client ${n}: an access token it received is not active`);
      }
      const refreshed = await refreshGrant(server.base, CLIENT_ID, client.chain.refreshToken);
      checked++;
      if (refreshed.status !== 200) {
        lost.push(`client ${n}: the refresh token it last received answered ${refreshed.status}`);
      }
    }
  } finally {
    await server.stop();
  }
  return { checked, lost };
}

/** Rounds of load, power cut at a random moment, restore, verify; all on one database. */
async function powerCuts(
  durability: Durability,
): Promise<{ verdicts: Verdict[]; syncedRounds: number; databaseFileWrites: number }> {
  const dataDir = mkdtempSync(join(root, `${durability}-`));
  const users = await seed(dataDir);
  const verdicts: Verdict[] = [];
  let syncedRounds = 0;
  let databaseFileWrites = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const log = join(root, `${durability}-${round}.log`);
    const server = await startServer({
      dataDir,
      durability,
      shim: { path: shim, log, fail: join(root, "never") },
    });
    const clients: Client[] = users.map(() => ({ uncertain: false, answers: 0 }));
    let cut = false;
    const load = users.map((user, i) => drive(server, user, clients[i]!, () => cut));
    // The cut comes at a random moment once every client has had answers.
    const deadline = Date.now() + 20_000;
    while (clients.some((c) => c.answers < 2) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 600));
    cut = true;
    await server.cut();
    await Promise.all(load);
    const restored = await restoreAfterPowerCut(log, dataDir);
    // The shim saw the server's writes and fsyncs this round (how many writes the cut reverted
    // depends on where it landed: none when everything written was synced by then).
    if (restored.durable + restored.reverted > 0 && restored.syncs > 0) syncedRounds++;
    const dbFile = restored.byFile["gatehouse.sqlite"];
    databaseFileWrites += (dbFile?.reverted ?? 0) + (dbFile?.durable ?? 0);
    verdicts.push(await verify(dataDir, clients));
  }
  return { verdicts, syncedRounds, databaseFileWrites };
}

describe("power loss under gatehouse serve on SQLite", () => {
  /** Every round's verdict: nothing lost, something checked; and the emulation was in force. */
  async function expectEveryAnswerSurvives(durability: Durability): Promise<void> {
    const { verdicts, syncedRounds, databaseFileWrites } = await powerCuts(durability);
    // The emulation was in force in every round, and the checkpoints wrote the database file under
    // it (the cuts can land mid-checkpoint).
    expect(syncedRounds).toBe(ROUNDS);
    expect(databaseFileWrites).toBeGreaterThan(0);
    for (const verdict of verdicts) {
      expect(verdict.lost).toEqual([]);
      expect(verdict.checked).toBeGreaterThan(0);
    }
  }

  it("synchronous = NORMAL with the store's WAL fsync (default): every answer received survives 3 power cuts", async () => {
    expect(ROUNDS).toBe(3);
    await expectEveryAnswerSurvives("normal");
  }, 120_000);

  it("synchronous = FULL (fallback): every answer received survives 3 power cuts", async () => {
    await expectEveryAnswerSurvives("full");
  }, 120_000);

  it("catches the broken build: NORMAL without the WAL fsync loses answers a client received", async () => {
    const { verdicts } = await powerCuts("unsafe-normal-without-fsync");
    const lost = verdicts.flatMap((v) => v.lost);
    expect(lost.length).toBeGreaterThan(0);
  }, 120_000);

  it("a failed fsync (EIO) releases no answer the cut takes back, and the store refuses every request after it", async () => {
    const dataDir = mkdtempSync(join(root, "eio-"));
    const users = await seed(dataDir);
    const log = join(root, "eio.log");
    const fail = join(root, "eio.fail");
    const server = await startServer({ dataDir, durability: "normal", shim: { path: shim, log, fail } });
    const clients: Client[] = users.map(() => ({ uncertain: false, answers: 0 }));
    let stopped = false;
    const load = users.map((user, i) => drive(server, user, clients[i]!, () => stopped));
    while (clients.some((c) => c.answers < 2)) await new Promise((resolve) => setTimeout(resolve, 20));
    // The disk starts failing writeback: the next fsync of each open file reports EIO once, later
    // ones "succeed" with the data gone (the shim's fsyncgate).
    writeFileSync(fail, "");
    stopped = true;
    await Promise.all(load);
    // Whatever was under way has failed or was answered; from now on every request is refused.
    const after = clients.find((c) => c.chain && !c.uncertain)!;
    for (let i = 0; i < 3; i++) {
      const refused = await refreshGrant(server.base, CLIENT_ID, after.chain!.refreshToken);
      expect(refused.status).toBe(503);
      expect(((await refused.json()) as { error: string }).error).toBe("temporarily_unavailable");
    }
    // The store refuses reads too, so the health check says so.
    expect((await fetch(`${server.base}/health`)).status).toBe(503);
    expect(existsSync(fail)).toBe(true);
    await server.cut();
    await restoreAfterPowerCut(log, dataDir);
    const verdict = await verify(dataDir, clients);
    expect(verdict.lost).toEqual([]);
    expect(verdict.checked).toBeGreaterThan(0);
  }, 120_000);
});
