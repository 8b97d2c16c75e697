/**
 * `EncryptedFileTokenStore` (spec "Token theft" 1): AES-256-GCM at rest, owner-only files, and a
 * wrong key reads nothing.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EncryptedFileTokenStore } from "../../../src/client/index.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const tokens = {
  issuer: "https://as.example",
  client_id: "c",
  resource: "https://rs.example/mcp",
  access_token: "secret-access-token-value",
  token_type: "bearer",
  refresh_token: "secret-refresh-token-value",
  obtained_at: 1,
};

describe("EncryptedFileTokenStore", () => {
  it("stores tokens encrypted, owner-only (dir 0700, files 0600), and survives a restart", async () => {
    const dir = join(mkdtempSync(join(tmpdir(), "gh-store-")), "cfg");
    dirs.push(dir);
    const store = new EncryptedFileTokenStore({ directory: dir });
    await store.set("tokens", "k", tokens);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "store.enc")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "store.key")).mode & 0o777).toBe(0o600);
    const raw = readFileSync(join(dir, "store.enc"), "utf8");
    expect(raw).not.toContain("secret-access-token-value");
    expect(raw).not.toContain("secret-refresh-token-value");
    const reopened = new EncryptedFileTokenStore({ directory: dir });
    expect(await reopened.get("tokens", "k")).toEqual(tokens);
  });

  it("a wrong key cannot read the file (AES-256-GCM authentication)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gh-store-"));
    dirs.push(dir);
    await new EncryptedFileTokenStore({ directory: dir, key: new Uint8Array(32).fill(1) }).set(
      "tokens",
      "k",
      tokens,
    );
    const other = new EncryptedFileTokenStore({ directory: dir, key: new Uint8Array(32).fill(2) });
    await expect(other.get("tokens", "k")).rejects.toThrow(/cannot decrypt/);
  });
});
