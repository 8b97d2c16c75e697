/**
 * The store key in the OS keychain, against a REAL Secret Service (gnome-keyring-daemon on a D-Bus
 * session bus this file starts, ./secret-service.ts): the key is in the keychain and nowhere on
 * disk, a store with a key file beside it moves over (also after an interruption at each step),
 * `defaultTokenStore` picks the keychain when one answers and the file otherwise, and a store
 * whose key is in the keychain is never given a fresh key file.
 *
 * Each store operation runs in its own process (./keychain-child.mjs on the built library): a
 * process reads the bus address once, so the test process itself never talks to the keychain.
 * Linux only (elsewhere the keychain is the system's own; a test does not start one).
 */
import { execFile } from "node:child_process";
import { createDecipheriv } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EncryptedFileTokenStore } from "../../../src/client/stores/encrypted-file.js";
import { ensureBuilt, runCli } from "../../cli/helpers.js";
import { type SecretService, startSecretService } from "./secret-service.js";

const run = promisify(execFile);
const CHILD = join(import.meta.dirname, "keychain-child.mjs");
const onLinux = process.platform === "linux";

const tokens = {
  issuer: "https://as.example",
  client_id: "c",
  resource: "https://rs.example/mcp",
  access_token: "secret-access-token-value",
  token_type: "bearer",
  refresh_token: "secret-refresh-token-value",
  obtained_at: 1,
};

/** The account the store files its key under (keychain.ts): one entry per store directory. */
const account = (directory: string) => `store-key ${resolve(directory)}`;

/** Decrypts store.enc with `keyText` (base64url) the way the format is specified, independently of the store. */
function decryptWith(directory: string, keyText: string): unknown {
  const envelope = JSON.parse(readFileSync(join(directory, "store.enc"), "utf8")) as {
    iv: string;
    tag: string;
    data: string;
  };
  const decipher = createDecipheriv(
    "aes-256-gcm",
    Buffer.from(keyText, "base64url"),
    Buffer.from(envelope.iv, "base64url"),
  );
  decipher.setAAD(Buffer.from("gatehouse-client-store-v1"));
  decipher.setAuthTag(Buffer.from(envelope.tag, "base64url"));
  const plain = Buffer.concat([decipher.update(Buffer.from(envelope.data, "base64url")), decipher.final()]);
  return JSON.parse(plain.toString("utf8"));
}

function envelopeKey(directory: string): unknown {
  return (JSON.parse(readFileSync(join(directory, "store.enc"), "utf8")) as { key?: unknown }).key;
}

describe.skipIf(!onLinux)(
  "the store key in a real Secret Service (Linux: dbus-daemon + gnome-keyring-daemon)",
  () => {
    let service: SecretService;
    const dirs: string[] = [];

    beforeAll(async () => {
      ensureBuilt();
      service = await startSecretService();
    });
    afterAll(async () => {
      await service?.stop();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    function storeDir(): string {
      const root = mkdtempSync(join(tmpdir(), "gh-keychain-"));
      dirs.push(root);
      return join(root, "cfg");
    }

    /** One store operation in a child process; `reachable: false` points it at a bus that is not there. */
    async function child(
      kind: "keychain" | "default" | "file",
      directory: string,
      op: "set" | "get",
      reachable = true,
    ): Promise<{ ok?: boolean; tokens?: unknown; error?: string; name?: string }> {
      const env = {
        ...process.env,
        ...service.env,
        GATEHOUSE_STORE_KEY: "",
        ...(!reachable && { DBUS_SESSION_BUS_ADDRESS: `unix:path=${join(directory, "..", "no-bus")}` }),
      };
      const args = [CHILD, kind, directory, op, ...(op === "set" ? [JSON.stringify(tokens)] : [])];
      const result = await run(process.execPath, args, { env }).catch(
        (error: { stdout?: string; stderr?: string }) => ({
          stdout: error.stdout ?? "",
          stderr: error.stderr ?? "",
        }),
      );
      expect(result.stderr).toBe("");
      return JSON.parse(result.stdout);
    }

    it("KeychainTokenStore: the key is in the keychain, no key file on disk, and the data reads back", async () => {
      const dir = storeDir();
      expect(await child("keychain", dir, "set")).toEqual({ ok: true });
      expect(existsSync(join(dir, "store.key"))).toBe(false);
      const raw = readFileSync(join(dir, "store.enc"), "utf8");
      expect(raw).not.toContain("secret-access-token-value");
      expect(raw).not.toContain("secret-refresh-token-value");
      expect(envelopeKey(dir)).toBe("keychain");
      // Seen through libsecret's own tool: the keychain's key opens the file.
      const keyText = await service.lookup("gatehouse", account(dir));
      expect(keyText).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(decryptWith(dir, keyText!)).toEqual({ tokens: { k: tokens } });
      // Another process reads it back through the keychain.
      expect(await child("keychain", dir, "get")).toEqual({ tokens });
      // The key text appears in no file of the directory.
      expect(readFileSync(join(dir, "store.enc"), "utf8")).not.toContain(keyText);
    });

    it("a store keyed in the keychain is never given a fresh key file where the keychain is not used", async () => {
      const dir = storeDir();
      expect(await child("keychain", dir, "set")).toEqual({ ok: true });
      const before = readFileSync(join(dir, "store.enc"), "utf8");
      // The plain file store (key beside the data) refuses, and names the keychain, not a secret.
      const refused = await child("file", dir, "get");
      expect(refused.name).toBe("KeychainUnavailableError");
      expect(refused.error).toMatch(/encrypted under a key kept in the OS keychain/);
      // The default store where no Secret Service answers: the same refusal.
      const unreachable = await child("default", dir, "set", false);
      expect(unreachable.error).toMatch(/encrypted under a key kept in the OS keychain/);
      expect(existsSync(join(dir, "store.key"))).toBe(false);
      expect(readFileSync(join(dir, "store.enc"), "utf8")).toBe(before);
      // KeychainTokenStore without a reachable keychain fails instead of falling back.
      const required = await child("keychain", storeDir(), "set", false);
      expect(required.name).toBe("KeychainUnavailableError");
      expect(required.error).toMatch(/^no OS keychain is reachable/);
    });

    it("defaultTokenStore: the keychain when it answers, else the key file beside the data", async () => {
      const withKeychain = storeDir();
      expect(await child("default", withKeychain, "set")).toEqual({ ok: true });
      expect(envelopeKey(withKeychain)).toBe("keychain");
      expect(existsSync(join(withKeychain, "store.key"))).toBe(false);
      expect(await service.lookup("gatehouse", account(withKeychain))).toBeTypeOf("string");

      const withoutKeychain = storeDir();
      expect(await child("default", withoutKeychain, "set", false)).toEqual({ ok: true });
      expect(envelopeKey(withoutKeychain)).toBe("file");
      expect(existsSync(join(withoutKeychain, "store.key"))).toBe(true);
      expect(await service.lookup("gatehouse", account(withoutKeychain))).toBeUndefined();
      expect(await child("default", withoutKeychain, "get", false)).toEqual({ tokens });
    });

    it("the gatehouse CLI keeps its store key in the keychain; GATEHOUSE_STORE_KEY_LOCATION=file keeps it beside the data", async () => {
      // A store the CLI made before keychains (key file beside the data), read by `gatehouse status`.
      const dir = storeDir();
      await new EncryptedFileTokenStore({ directory: dir }).set("tokens", "k", tokens);
      const cli = (env: Record<string, string>) =>
        runCli(["status"], {
          env: { ...service.env, GATEHOUSE_STORE_KEY: "", GATEHOUSE_CONFIG_DIR: dir, ...env },
        });
      // Unset (empty) is the default, auto; the test helpers otherwise pin file.
      const status = await cli({ GATEHOUSE_STORE_KEY_LOCATION: "" });
      expect(status.stderr).toBe("");
      expect(status.code).toBe(0);
      expect(status.stdout).toContain("https://rs.example/mcp");
      // It moved: the key is in the keychain and no longer on disk.
      expect(existsSync(join(dir, "store.key"))).toBe(false);
      expect(envelopeKey(dir)).toBe("keychain");
      expect(await service.lookup("gatehouse", account(dir))).toMatch(/^[A-Za-z0-9_-]{43}$/);

      // Where the operator says file, a new store keeps its key file and the keychain is not asked.
      const fileDir = storeDir();
      await new EncryptedFileTokenStore({ directory: fileDir }).set("tokens", "k", tokens);
      expect((await cli({ GATEHOUSE_CONFIG_DIR: fileDir, GATEHOUSE_STORE_KEY_LOCATION: "file" })).code).toBe(
        0,
      );
      expect(existsSync(join(fileDir, "store.key"))).toBe(true);
      expect(await service.lookup("gatehouse", account(fileDir))).toBeUndefined();

      // A value the CLI does not know is a usage error naming the variable, before any store is opened.
      const wrong = await cli({ GATEHOUSE_STORE_KEY_LOCATION: "usb-stick" });
      expect(wrong.code).toBe(2);
      expect(wrong.stderr).toMatch(/GATEHOUSE_STORE_KEY_LOCATION/);
    });

    it("moves a store with a key file beside it: re-encrypted under a new keychain key, then the key file removed", async () => {
      const dir = storeDir();
      await new EncryptedFileTokenStore({ directory: dir }).set("tokens", "k", tokens);
      const oldKey = readFileSync(join(dir, "store.key"), "utf8");
      expect(decryptWith(dir, oldKey)).toEqual({ tokens: { k: tokens } });

      expect(await child("default", dir, "get")).toEqual({ tokens });
      expect(existsSync(join(dir, "store.key"))).toBe(false);
      expect(envelopeKey(dir)).toBe("keychain");
      const newKey = await service.lookup("gatehouse", account(dir));
      expect(newKey).toBeTypeOf("string");
      expect(newKey).not.toBe(oldKey);
      expect(decryptWith(dir, newKey!)).toEqual({ tokens: { k: tokens } });
      // The key that sat beside the data no longer opens it.
      expect(() => decryptWith(dir, oldKey)).toThrow();
      expect(await child("keychain", dir, "get")).toEqual({ tokens });
    });

    it("finishes a move cut short after the keychain write, and after the re-encryption", async () => {
      const dir = storeDir();
      await new EncryptedFileTokenStore({ directory: dir }).set("tokens", "k", tokens);
      const saved = join(dir, "..");
      copyFileSync(join(dir, "store.enc"), join(saved, "legacy.enc"));
      copyFileSync(join(dir, "store.key"), join(saved, "legacy.key"));
      expect(await child("default", dir, "get")).toEqual({ tokens });
      const keychainKey = await service.lookup("gatehouse", account(dir));

      // Cut short after step 1: the keychain holds the new key, the data and key file are the old ones.
      copyFileSync(join(saved, "legacy.enc"), join(dir, "store.enc"));
      copyFileSync(join(saved, "legacy.key"), join(dir, "store.key"));
      expect(await child("default", dir, "get")).toEqual({ tokens });
      expect(existsSync(join(dir, "store.key"))).toBe(false);
      expect(await service.lookup("gatehouse", account(dir))).toBe(keychainKey);
      expect(decryptWith(dir, keychainKey!)).toEqual({ tokens: { k: tokens } });

      // Cut short after step 2: the data is re-encrypted, the old key file is still there.
      copyFileSync(join(saved, "legacy.key"), join(dir, "store.key"));
      expect(await child("keychain", dir, "get")).toEqual({ tokens });
      expect(existsSync(join(dir, "store.key"))).toBe(false);
    });

    it("a damaged file is not moved: the key file stays and the error names no secret", async () => {
      const dir = storeDir();
      await new EncryptedFileTokenStore({ directory: dir }).set("tokens", "k", tokens);
      const keyText = readFileSync(join(dir, "store.key"), "utf8");
      const envelope = JSON.parse(readFileSync(join(dir, "store.enc"), "utf8"));
      // Another key's file: authentication fails.
      const other = storeDir();
      await new EncryptedFileTokenStore({ directory: other }).set("tokens", "k", tokens);
      copyFileSync(join(other, "store.enc"), join(dir, "store.enc"));
      const failed = await child("default", dir, "get");
      expect(failed.error).toMatch(/cannot decrypt .*store\.enc: wrong key or damaged file/);
      expect(failed.error).not.toContain(keyText);
      expect(failed.error).not.toContain(envelope.data);
      expect(readFileSync(join(dir, "store.key"), "utf8")).toBe(keyText);
    });
  },
);
