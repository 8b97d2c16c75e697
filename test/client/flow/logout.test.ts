/**
 * RFC 7009 revocation by the client: `logout` revokes the stored refresh token and the live access
 * token at `revocation_endpoint` before forgetting them (and forgets them when revocation fails,
 * saying so); a step-up that yields a new refresh token revokes the superseded one in the
 * background, without holding up the retried request and without the token in any event.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { run as runLogout } from "../../../src/cli/commands/logout.js";
import {
  AuthClient,
  type AuthEvent,
  AuthorizationFlowError,
  EncryptedFileTokenStore,
  MemoryTokenStore,
  type StoreKind,
} from "../../../src/client/index.js";
import { type Fake, type FakeOptions, followRedirect, startFake } from "../fixtures.js";

const REDIRECT = "http://127.0.0.1:9/callback";
let fake: Fake | undefined;
afterEach(async () => {
  fake?.releaseRevocations();
  await fake?.close();
  fake = undefined;
});

async function setup(options: FakeOptions) {
  fake = await startFake(options);
  return fake;
}

/** A memory store that notes how many revocation calls the fake had seen when tokens were deleted. */
class OrderedStore extends MemoryTokenStore {
  readonly revocationsAtDelete: number[] = [];
  constructor(readonly fake: Fake) {
    super();
  }
  override async delete(kind: StoreKind, key: string): Promise<void> {
    if (kind === "tokens") this.revocationsAtDelete.push(this.fake.seen.revoke.length);
    return super.delete(kind, key);
  }
}

describe("logout revokes before it forgets (RFC 7009 §2.1)", () => {
  it("revokes the refresh token, then the live access token, as the registered public client; then deletes", async () => {
    const f = await setup({ revocation: "ok" });
    const store = new OrderedStore(f);
    const client = new AuthClient({ store, redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    const result = await client.logout();
    expect(result.removed).toBe(1);
    expect(result.outcomes).toEqual([
      { resource: `${f.base}/mcp`, issuer: f.base, client_id: "client-1", revocation: "revoked" },
    ]);
    expect(f.seen.revoke.map((r) => [r.form.get("token"), r.form.get("token_type_hint")])).toEqual([
      ["rt-1", "refresh_token"],
      ["at-1", "access_token"],
    ]);
    // Client authentication as registered: a public client identifies itself with client_id.
    expect(f.seen.revoke.every((r) => r.form.get("client_id") === "client-1")).toBe(true);
    expect(store.revocationsAtDelete).toEqual([2]);
    expect(await store.list("tokens")).toEqual([]);
    // The revoked access token no longer works at the resource: the call really revoked it.
    const reuse = await fetch(f.resourceUrl, { headers: { authorization: "Bearer at-1" } });
    expect(reuse.status).toBe(401);
  });

  it("a server without revocation_endpoint: forgotten locally, reported as no_endpoint, no call", async () => {
    const f = await setup({});
    const client = new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    const result = await client.logout();
    expect(result.outcomes.map((o) => o.revocation)).toEqual(["no_endpoint"]);
    expect(f.counts["/revoke"]).toBeUndefined();
    expect(await client.store.list("tokens")).toEqual([]);
  });

  it("a refused revocation is reported (failed, with the OAuth error) and the tokens are forgotten anyway", async () => {
    const f = await setup({ revocation: "fail" });
    const client = new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    const result = await client.logout();
    const [outcome] = result.outcomes;
    expect(outcome?.revocation).toBe("failed");
    expect(outcome?.error).toBeInstanceOf(AuthorizationFlowError);
    const error = outcome?.error as AuthorizationFlowError;
    expect(error.code).toBe("revocation_failed");
    expect(error.oauthError?.error).toBe("invalid_request");
    expect(error.message).toContain("token revocation, refresh_token (RFC 7009 §2.1");
    expect(error.message).not.toContain("rt-1");
    expect(await client.store.list("tokens")).toEqual([]);
  });

  it("an unreachable server: failed with transport_failed naming the endpoint; forgotten anyway", async () => {
    const f = await setup({ revocation: "ok" });
    const client = new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    await f.close();
    fake = undefined;
    const result = await client.logout();
    const error = result.outcomes[0]?.error as AuthorizationFlowError;
    expect(result.outcomes[0]?.revocation).toBe("failed");
    expect(error.code).toBe("transport_failed");
    expect(error.url).toBe(`${f.base}/revoke`);
    expect(await client.store.list("tokens")).toEqual([]);
  });

  it("revoke: false forgets without telling the server", async () => {
    const f = await setup({ revocation: "ok" });
    const client = new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    const result = await client.logout(undefined, { revoke: false });
    expect(result.outcomes.map((o) => o.revocation)).toEqual(["skipped"]);
    expect(f.seen.revoke).toEqual([]);
  });

  it("only the named resource is logged out", async () => {
    const f = await setup({ revocation: "ok" });
    const client = new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    const result = await client.logout("https://other.example/mcp");
    expect(result).toEqual({ removed: 0, outcomes: [] });
    expect(f.seen.revoke).toEqual([]);
    expect(await client.store.list("tokens")).toHaveLength(1);
  });
});

describe("with revokeSupersededRefreshTokens, step-up revokes the superseded refresh token (best effort, in the background)", () => {
  it("the retried request does not wait for the revocation; the old refresh token is revoked afterwards", async () => {
    const f = await setup({ requiredScope: "write", revocation: "hold" });
    const events: AuthEvent[] = [];
    const client = new AuthClient({
      redirectUri: REDIRECT,
      userAgent: followRedirect,
      revokeSupersededRefreshTokens: true,
      onEvent: (e) => events.push(e),
    });
    // The first authorization grants "read"; the resource wants "write": one step-up.
    const response = await client.fetch(f.resourceUrl);
    // Were the revocation awaited, this request would never finish: the fake holds it unanswered.
    expect(response.status).toBe(200);
    await vi.waitFor(() => expect(f.seen.revoke).toHaveLength(1));
    expect(f.seen.revoke[0]?.form.get("token")).toBe("rt-1");
    expect(f.seen.revoke[0]?.form.get("token_type_hint")).toBe("refresh_token");
    f.releaseRevocations();
    await client.idle();
    const [[, stored] = []] = await client.store.list("tokens");
    expect(stored?.refresh_token).toBe("rt-2");
    expect(events.some((e) => e.type === "revocation_failed")).toBe(false);
  });

  it("a failed revocation of the superseded token is an event without the token; the request still succeeds", async () => {
    const f = await setup({ requiredScope: "write", revocation: "fail" });
    const events: AuthEvent[] = [];
    const client = new AuthClient({
      redirectUri: REDIRECT,
      userAgent: followRedirect,
      revokeSupersededRefreshTokens: true,
      onEvent: (e) => events.push(e),
    });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    await client.idle();
    const failed = events.filter((e) => e.type === "revocation_failed");
    expect(failed).toHaveLength(1);
    expect(JSON.stringify(events)).not.toMatch(/rt-\d|at-\d/);
  });

  it("by default (off) the old grant is left alone", async () => {
    const f = await setup({ requiredScope: "write", revocation: "ok" });
    const client = new AuthClient({
      redirectUri: REDIRECT,
      userAgent: followRedirect,
    });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
    await client.idle();
    expect(f.seen.revoke).toEqual([]);
  });
});

describe("gatehouse logout (the command)", () => {
  let configDir: string;
  beforeAll(() => {
    configDir = mkdtempSync(join(tmpdir(), "gatehouse-logout-"));
    process.env.GATEHOUSE_CONFIG_DIR = configDir;
  });
  afterAll(() => {
    rmSync(configDir, { recursive: true, force: true });
  });

  async function command(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = "";
    let stderr = "";
    const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      stdout += String(chunk);
      return true;
    });
    const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    try {
      return { code: await runLogout(args), stdout, stderr };
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  }

  async function loginInto(f: Fake): Promise<void> {
    const client = new AuthClient({
      store: new EncryptedFileTokenStore({ directory: configDir }),
      redirectUri: REDIRECT,
      userAgent: followRedirect,
    });
    expect((await client.fetch(f.resourceUrl)).status).toBe(200);
  }

  it("revokes, forgets, exit 0", async () => {
    const f = await setup({ revocation: "ok" });
    await loginInto(f);
    const { code, stdout, stderr } = await command([]);
    expect(stderr).toBe("");
    expect(stdout).toBe(`Forgot 1 token set(s).\n  ${f.base}/mcp: revoked at ${f.base}\n`);
    expect(code).toBe(0);
    expect(f.seen.revoke).toHaveLength(2);
  });

  it("a failed revocation: forgotten, the failure and next step on stderr, exit status 3", async () => {
    const f = await setup({ revocation: "fail" });
    await loginInto(f);
    const { code, stdout, stderr } = await command([`${f.base}/mcp`]);
    expect(code).toBe(3);
    expect(stdout).toBe(`Forgot 1 token set(s).\n  ${f.base}/mcp: NOT revoked at ${f.base} (see below)\n`);
    expect(stderr).toContain(`gatehouse logout: could not revoke the tokens for ${f.base}/mcp at ${f.base}:`);
    expect(stderr).toContain("[invalid_request]");
    expect(stderr).toContain("stay valid at the server until they expire");
    expect(stderr).not.toMatch(/rt-\d|at-\d/);
    expect(await new EncryptedFileTokenStore({ directory: configDir }).list("tokens")).toEqual([]);
  });

  it("--local forgets without a call", async () => {
    const f = await setup({ revocation: "ok" });
    await loginInto(f);
    const { code, stdout } = await command(["--local"]);
    expect(code).toBe(0);
    expect(stdout).toContain("(--local:");
    expect(f.seen.revoke).toEqual([]);
  });
});
