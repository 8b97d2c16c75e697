/**
 * Several processes sharing one token store refresh ONE time between them (TokenStore.withLock
 * around flow/refresh.ts), against this repository's authorization server, whose reuse detection
 * (RFC 9700 §4.14.2) revokes the whole grant when a rotated refresh token is presented twice.
 *
 * The parent signs in once through the real /authorize, /login, /consent and /token pages, writing
 * the encrypted file store; it then marks the access token expired and starts real node processes
 * (./refresh-child.mjs, the built client library) over the same directory, released together.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../../src/authorization-server/index.js";
import { AuthClient, EncryptedFileTokenStore } from "../../../src/client/index.js";
import {
  type AdminServer,
  CLIENT_ID,
  REDIRECT_URI,
  RESOURCE,
  startAdminServer,
  tryRefresh,
} from "../../authorization-server/pages/admin-server.js";
import { ensureBuilt } from "../../cli/helpers.js";
import { Browser, consentingUserAgent } from "../../support/flow.js";

const CHILD = join(import.meta.dirname, "refresh-child.mjs");
const PRM_URL = "https://notes.example/.well-known/oauth-protected-resource/api";

let server: AdminServer | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await server?.close();
  server = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

beforeAll(() => ensureBuilt());

/** The stand-in resource (the children answer it the same way): PRM, 401 without a token, else 200. */
function notesResource(issuer: string) {
  return (request: Request): Response => {
    if (request.url === PRM_URL) {
      return Response.json({
        resource: RESOURCE,
        authorization_servers: [issuer],
        scopes_supported: ["notes:read"],
      });
    }
    if (!(request.headers.get("authorization") ?? "").startsWith("Bearer ")) {
      return new Response(null, {
        status: 401,
        headers: { "www-authenticate": `Bearer resource_metadata="${PRM_URL}", scope="notes:read"` },
      });
    }
    return Response.json({ ok: true });
  };
}

/** Signs the fixture user in and approves consent on the real pages; returns the callback URL. */
function userAgent(t: AdminServer, browser: Browser) {
  return consentingUserAgent(browser, { issuer: t.url, ...t.user, redirectUri: REDIRECT_URI });
}

/** A real sign-in into a fresh store directory, then the access token marked expired (the refresh token kept). */
async function signedInStore(t: AdminServer): Promise<string> {
  const directory = join(mkdtempSync(join(tmpdir(), "gh-shared-refresh-")), "cfg");
  dirs.push(directory);
  const notes = notesResource(t.url);
  const client = new AuthClient({
    store: new EncryptedFileTokenStore({ directory }),
    redirectUri: REDIRECT_URI,
    userAgent: userAgent(t, new Browser()),
    preregisteredClients: { [t.url]: { client_id: CLIENT_ID } },
    fetch: async (input, init) => {
      const request = new Request(input, init);
      return new URL(request.url).origin === "https://notes.example" ? notes(request) : fetch(request);
    },
  });
  expect((await client.fetch(`${RESOURCE}/read`)).status).toBe(200);
  const [[key, tokens] = []] = await client.store.list("tokens");
  expect(tokens?.refresh_token).toBeTypeOf("string");
  await client.store.set("tokens", key!, { ...tokens!, expires_at: Date.now() - 1000 });
  return directory;
}

interface Child {
  process: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  /** Exit code or signal, with what the child printed after "ready". */
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; result: string; stderr: string }>;
}

function startChild(t: AdminServer, directory: string, mode = ""): Child {
  const child = spawn(process.execPath, [CHILD], {
    env: {
      ...process.env,
      STORE_DIR: directory,
      ISSUER: t.url,
      RESOURCE,
      CLIENT_ID,
      CHILD_MODE: mode,
      GATEHOUSE_STORE_KEY: "",
    },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (c: string) => {
    stderr += c;
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding("utf8").on("data", (c: string) => {
      stdout += c;
      if (stdout.startsWith("ready\n")) resolve();
    });
    child.once("exit", () => reject(new Error(`the child exited before it was ready: ${stderr}`)));
  });
  const done = new Promise<{
    code: number | null;
    signal: NodeJS.Signals | null;
    result: string;
    stderr: string;
  }>((resolve) =>
    child.once("close", (code, signal) =>
      resolve({ code, signal, result: stdout.replace(/^ready\n/, "").trim(), stderr }),
    ),
  );
  return { process: child, ready, done };
}

/** Starts the children, waits until each has loaded, then releases them together. */
async function runTogether(children: Child[]) {
  await Promise.all(children.map((c) => c.ready));
  for (const c of children) c.process.stdin.end("go\n");
  return Promise.all(children.map((c) => c.done));
}

function countEvents(events: AuditEvent[], type: AuditEvent["type"]): number {
  return events.filter((e) => e.type === type).length;
}

/** The lock files a store directory holds (`*.lock`). */
function lockFiles(directory: string): string[] {
  return readdirSync(directory).filter((name) => name.endsWith(".lock"));
}

describe("refresh shared by processes over one token store", () => {
  it("four processes with an expired token: one refresh, all succeed, the grant survives", async () => {
    const events: AuditEvent[] = [];
    const t = await startAdminServer({ onAuditEvent: (event) => void events.push(event) });
    server = t;
    const directory = await signedInStore(t);
    expect(countEvents(events, "grant_issued")).toBe(1);

    const results = await runTogether([1, 2, 3, 4].map(() => startChild(t, directory)));
    for (const r of results) {
      expect(r.stderr).toBe("");
      expect(r.result).toBe('{"status":200}');
      expect(r.code).toBe(0);
    }
    // Exactly one rotation; no rotated token came back (which would have revoked the grant).
    expect(countEvents(events, "grant_refreshed")).toBe(1);
    expect(countEvents(events, "refresh_token_reused")).toBe(0);
    const [grant] = await t.store.listGrants({ userId: t.user.id });
    expect(grant?.revokedAt).toBeUndefined();
    // The refresh token the store kept is the live one.
    const [[, tokens] = []] = await new EncryptedFileTokenStore({ directory }).list("tokens");
    expect(await tryRefresh(t, tokens!.refresh_token!)).toEqual({ status: 200 });
    expect(lockFiles(directory)).toEqual([]);
  });

  it("a lock left by a process killed mid-refresh is taken over; still one refresh", async () => {
    const events: AuditEvent[] = [];
    const t = await startAdminServer({ onAuditEvent: (event) => void events.push(event) });
    server = t;
    const directory = await signedInStore(t);

    // This one dies by SIGKILL holding the refresh lock, before its request leaves.
    const dying = startChild(t, directory, "die-in-refresh");
    const [killed] = await runTogether([dying]);
    expect(killed?.signal).toBe("SIGKILL");
    const left = lockFiles(directory);
    expect(left).toHaveLength(1);
    const owner = JSON.parse(readFileSync(join(directory, left[0]!), "utf8")) as { pid: number };
    expect(owner.pid).toBe(dying.process.pid);
    expect(() => process.kill(owner.pid, 0)).toThrow(expect.objectContaining({ code: "ESRCH" }));
    expect(countEvents(events, "grant_refreshed")).toBe(0);

    const results = await runTogether([1, 2, 3].map(() => startChild(t, directory)));
    for (const r of results) {
      expect(r.stderr).toBe("");
      expect(r.result).toBe('{"status":200}');
    }
    expect(countEvents(events, "grant_refreshed")).toBe(1);
    expect(countEvents(events, "refresh_token_reused")).toBe(0);
    const [grant] = await t.store.listGrants({ userId: t.user.id });
    expect(grant?.revokedAt).toBeUndefined();
    expect(lockFiles(directory)).toEqual([]);
  });
});
