/**
 * TEST-ONLY child for store-locks.test.ts: one process using the built `EncryptedFileTokenStore`
 * over the directory its siblings share. Waits for a line on stdin, then, ROUNDS times:
 * - CHILD_MODE=counter: under `store.withLock("counter")`, reads COUNTER_FILE, yields to the event
 *   loop, writes the number plus one (a lost update shows as a smaller final count);
 * - CHILD_MODE=writes: `store.set("client", "<CHILD_ID>-<round>", …)` (a dropped write shows as a
 *   missing entry).
 * Prints "done".
 */
import { readFile, writeFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { EncryptedFileTokenStore } from "../../../dist/client/index.js";

const { STORE_DIR, CHILD_MODE, CHILD_ID, COUNTER_FILE } = process.env;
const ROUNDS = Number(process.env.ROUNDS);
const store = new EncryptedFileTokenStore({ directory: STORE_DIR });

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();
for (let round = 0; round < ROUNDS; round++) {
  if (CHILD_MODE === "counter") {
    await store.withLock("counter", async () => {
      const count = Number(await readFile(COUNTER_FILE, "utf8"));
      await new Promise((resolve) => setImmediate(resolve));
      await writeFile(COUNTER_FILE, String(count + 1));
    });
  } else {
    await store.set("client", `${CHILD_ID}-${round}`, {
      issuer: "https://as.example",
      client_id: `${CHILD_ID}-${round}`,
      token_endpoint_auth_method: "none",
      source: "dynamic",
      registered_at: round,
    });
  }
}
process.stdout.write("done\n");
