/**
 * TEST-ONLY child for shared-refresh.test.ts: one "application" using the built client library
 * (dist/client) over the store directory that its siblings share. It waits for a line on stdin,
 * fetches `${RESOURCE}/read` once and prints `{"status": N}`.
 *
 * The resource (`https://notes.example/api`) is outside this machine: the client's fetch answers
 * its origin with a stand-in (protected resource metadata naming the real authorization server in
 * the parent test, and a 200 for any bearer token); every other request is real HTTP.
 *
 * Environment: STORE_DIR, ISSUER, RESOURCE, CLIENT_ID; CHILD_MODE=die-in-refresh makes the process
 * SIGKILL itself just before it would send its refresh request, so it dies holding the lock.
 */
import { createInterface } from "node:readline";
import { AuthClient, EncryptedFileTokenStore } from "../../../dist/client/index.js";

const { STORE_DIR, ISSUER, RESOURCE, CLIENT_ID, CHILD_MODE } = process.env;
const resourceOrigin = new URL(RESOURCE).origin;
const prmUrl = `${resourceOrigin}/.well-known/oauth-protected-resource${new URL(RESOURCE).pathname}`;

function standIn(request) {
  const url = new URL(request.url);
  if (url.href === prmUrl) {
    return Response.json({
      resource: RESOURCE,
      authorization_servers: [ISSUER],
      scopes_supported: ["notes:read"],
    });
  }
  const auth = request.headers.get("authorization") ?? "";
  if (!auth.startsWith("Bearer ")) {
    return new Response(null, {
      status: 401,
      headers: { "www-authenticate": `Bearer resource_metadata="${prmUrl}", scope="notes:read"` },
    });
  }
  return Response.json({ ok: true });
}

const client = new AuthClient({
  store: new EncryptedFileTokenStore({ directory: STORE_DIR }),
  preregisteredClients: { [ISSUER]: { client_id: CLIENT_ID } },
  fetch: async (input, init) => {
    const request = new Request(input, init);
    if (new URL(request.url).origin === resourceOrigin) return standIn(request);
    if (CHILD_MODE === "die-in-refresh" && request.method === "POST") {
      const form = new URLSearchParams(await request.clone().text());
      if (form.get("grant_type") === "refresh_token") process.kill(process.pid, "SIGKILL");
    }
    return fetch(request);
  },
});

process.stdout.write("ready\n");
const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();
try {
  const response = await client.fetch(`${RESOURCE}/read`);
  await response.body?.cancel();
  process.stdout.write(`${JSON.stringify({ status: response.status })}\n`);
} catch (error) {
  // The error's text only (the client's errors carry no token).
  process.stdout.write(`${JSON.stringify({ error: String(error?.message ?? error) })}\n`);
  process.exitCode = 1;
}
