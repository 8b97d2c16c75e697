/**
 * The client's public paths fail with a Gatehouse error a caller can branch on by `code`
 * (shared/errors.ts, DESIGN.md principle 3; issue 23 item 9), not with a plain Error whose only
 * content is its message: a bad option of AuthClient is a GatehouseTypeError (still a TypeError,
 * ERR_INVALID_OPTION); dynamic registration at a server without a registration endpoint is an
 * AuthorizationFlowError (`client_information_required`, the caller must supply a client); a token
 * store file that cannot be read is a TokenStoreError (ERR_STORE_UNREADABLE). Real files in a
 * temporary directory; nothing stubbed.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  type CreateAuthFetchOptions,
  EncryptedFileTokenStore,
  MemoryTokenStore,
  registerDynamically,
} from "../../src/client/index.js";
import { isGatehouseError } from "../../src/shared/errors.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function storeDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "gatehouse-store-errors-"));
  dirs.push(dir);
  return dir;
}

/** What the caller sees when `run` throws (or rejects): its class name, code and whether it is ours. */
async function failure(
  run: () => unknown,
): Promise<{ name: string; code: unknown; ours: boolean; typeError: boolean }> {
  try {
    await run();
  } catch (error) {
    const e = error as Error & { code?: unknown };
    return { name: e.name, code: e.code, ours: isGatehouseError(e), typeError: e instanceof TypeError };
  }
  throw new Error("did not fail");
}

describe("AuthClient options", () => {
  const bad: Array<[string, CreateAuthFetchOptions]> = [
    ["maxStepUps not a non-negative integer", { maxStepUps: -1 }],
    [
      "deviceAuthorization with a browser flow",
      { deviceAuthorization: { onPrompt: () => {} }, redirectUri: "http://127.0.0.1:1/cb" },
    ],
    ["userAgent without redirectUri", { userAgent: { open: async () => {} } as never }],
  ];
  for (const [what, options] of bad) {
    it(`${what}: GatehouseTypeError ERR_INVALID_OPTION, still a TypeError`, async () => {
      expect(await failure(() => new AuthClient(options))).toEqual({
        name: "GatehouseTypeError",
        code: "ERR_INVALID_OPTION",
        ours: true,
        typeError: true,
      });
    });
  }
});

describe("registerDynamically", () => {
  it("at a server without registration_endpoint: AuthorizationFlowError client_information_required", async () => {
    const refused = await failure(() =>
      registerDynamically({
        issuer: "https://as.example",
        metadata: {
          issuer: "https://as.example",
          authorization_endpoint: "https://as.example/authorize",
          token_endpoint: "https://as.example/token",
          response_types_supported: ["code"],
        },
        store: new MemoryTokenStore(),
        fetch: () => Promise.reject(new Error("no request is expected")),
        redirectUri: "http://127.0.0.1:1/callback",
      }),
    );
    expect(refused).toEqual({
      name: "AuthorizationFlowError",
      code: "client_information_required",
      ours: true,
      typeError: false,
    });
  });
});

describe("EncryptedFileTokenStore on a file it cannot read", () => {
  const key = new Uint8Array(32).fill(7);
  const unreadable = { name: "TokenStoreError", code: "ERR_STORE_UNREADABLE", ours: true, typeError: false };

  it("a damaged file (not JSON)", async () => {
    const directory = storeDir();
    writeFileSync(join(directory, "store.enc"), "{ not json", { mode: 0o600 });
    const store = new EncryptedFileTokenStore({ directory, key });
    expect(await failure(() => store.get("client", "x"))).toEqual(unreadable);
  });

  it("a file written under another key", async () => {
    const directory = storeDir();
    await new EncryptedFileTokenStore({ directory, key: new Uint8Array(32).fill(9) }).set("server", "s", {
      issuer: "https://as.example",
    } as never);
    const store = new EncryptedFileTokenStore({ directory, key });
    expect(await failure(() => store.get("server", "s"))).toEqual(unreadable);
  });

  it("a format version this one does not know", async () => {
    const directory = storeDir();
    writeFileSync(join(directory, "store.enc"), JSON.stringify({ v: 2, iv: "", tag: "", data: "" }), {
      mode: 0o600,
    });
    const store = new EncryptedFileTokenStore({ directory, key });
    expect(await failure(() => store.get("client", "x"))).toEqual(unreadable);
  });

  it("a key file larger than a key", async () => {
    const directory = storeDir();
    // The key is read only once there is data to open.
    writeFileSync(join(directory, "store.enc"), JSON.stringify({ v: 1, iv: "", tag: "", data: "" }), {
      mode: 0o600,
    });
    writeFileSync(join(directory, "store.key"), "A".repeat(4096), { mode: 0o600 });
    const store = new EncryptedFileTokenStore({ directory, keyLocation: "file" });
    expect(await failure(() => store.get("client", "x"))).toEqual(unreadable);
  });
});
