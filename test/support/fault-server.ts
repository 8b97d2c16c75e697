/**
 * An in-process authorization server on loopback over a store the test controls, for the
 * database-fault tests: the test breaks the database under a running server (lock, read-only, disk
 * full, down) and checks what `/token` answers.
 */
import { createHash } from "node:crypto";
import { expect } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import { type ObtainedCode, obtainCode, redeemCode } from "./flow.js";
import { serveInProcess, testFlow } from "./in-process.js";
import { createUsers, testClient } from "./instances.js";

export interface FaultServer {
  base: string;
  /** Runs login and consent (while the database is healthy) and returns a fresh code. */
  newCode(): Promise<ObtainedCode>;
  redeem(obtained: ObtainedCode): Promise<Response>;
  close(): Promise<void>;
}

/** Migrates `store`, adds the test client and a user, and serves it on 127.0.0.1 (port 0). */
export async function startFaultServer(store: AuthorizationStore): Promise<FaultServer> {
  await store.migrate();
  await store.createClient(testClient());
  const [username] = await createUsers(store, "fault", 1);
  const served = await serveInProcess(store);
  const base = served.http.url;
  const flow = testFlow(() => base, username!);
  return {
    base,
    newCode: () => obtainCode(flow),
    redeem: (obtained) => redeemCode(base, flow, obtained),
    close: () => served.close(),
  };
}

/** SHA-256 (base64url) of a code: the key the store keeps it under. */
export function codeHash(code: string): string {
  return createHash("sha256").update(code).digest("base64url");
}

/**
 * Asserts the answer to a `/token` request made while the database is unavailable: 503 with an
 * OAuth error body `temporarily_unavailable` (RFC 6749 §5.2 code for a temporary condition),
 * `Cache-Control: no-store` (RFC 6749 §5.1), `Retry-After`, and no token of any kind.
 */
export async function expectUnavailable(response: Response): Promise<void> {
  const text = await response.text();
  expect(response.status, text).toBe(503);
  expect(response.headers.get("content-type")).toMatch(/^application\/json/);
  expect(response.headers.get("cache-control")).toContain("no-store");
  expect(response.headers.get("retry-after")).toMatch(/^\d+$/);
  const body = JSON.parse(text) as Record<string, unknown>;
  expect(body.error).toBe("temporarily_unavailable");
  expect(body).not.toHaveProperty("access_token");
  expect(body).not.toHaveProperty("refresh_token");
}

/** Asserts a successful redemption (the code survived the outage unconsumed). */
export async function expectIssued(response: Response): Promise<void> {
  const text = await response.text();
  expect(response.status, text).toBe(200);
  const body = JSON.parse(text) as Record<string, unknown>;
  expect(body.access_token).toBeTypeOf("string");
  expect(body.refresh_token).toBeTypeOf("string");
}
