/**
 * TEST-ONLY child for keychain.test.ts: one store operation in a fresh process, so that it sees the
 * D-Bus session the test started (the bus address is read once per process). Uses the built
 * library. argv: <store: keychain | default | file> <directory> <op: set | get> [tokens JSON].
 * Prints `{"tokens": …}` for get, `{"ok": true}` for set, `{"error": message, "name": …}` on failure.
 */
import {
  defaultTokenStore,
  EncryptedFileTokenStore,
  KeychainTokenStore,
} from "../../../dist/client/index.js";

const [kind, directory, op, json] = process.argv.slice(2);
const store =
  kind === "keychain"
    ? new KeychainTokenStore({ directory })
    : kind === "default"
      ? defaultTokenStore({ directory })
      : new EncryptedFileTokenStore({ directory });
try {
  if (op === "set") {
    await store.set("tokens", "k", JSON.parse(json));
    process.stdout.write(`${JSON.stringify({ ok: true })}\n`);
  } else {
    process.stdout.write(`${JSON.stringify({ tokens: (await store.get("tokens", "k")) ?? null })}\n`);
  }
} catch (error) {
  process.stdout.write(`${JSON.stringify({ error: error.message, name: error.name })}\n`);
  process.exitCode = 1;
}
