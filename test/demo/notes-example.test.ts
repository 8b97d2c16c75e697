import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { importExample } from "../examples/package-source.js";

type NotesModule = typeof import("../../examples/notes/server.js");

// examples/notes/server.ts run as a user would, its `gatehouse/*` imports pointed at the sources.
let notes: Awaited<ReturnType<NotesModule["startNotes"]>>;
let sign: (scope: string) => Promise<string>;

beforeAll(async () => {
  const { startNotes } = await importExample<NotesModule>("examples/notes/server.ts");
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const issuer = "https://issuer.example";
  notes = await startNotes({
    issuer,
    jwks: { keys: [{ ...(await exportJWK(publicKey)), kid: "t", alg: "ES256" }] },
  });
  sign = (scope) =>
    new SignJWT({ sub: "alice", scope })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "t" })
      .setIssuer(issuer)
      .setAudience(notes.url)
      .setExpirationTime("5m")
      .sign(privateKey);
});
afterAll(async () => {
  await notes?.close();
});

describe("examples/notes", () => {
  it("challenges without a token and serves its metadata", async () => {
    const res = await fetch(`${notes.url}/notes`);
    expect(res.status).toBe(401);
    const [c] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
    expect(c?.params.resource_metadata).toBe(`${notes.url}/.well-known/oauth-protected-resource`);
    const doc = await (await fetch(c!.params.resource_metadata!)).json();
    expect(doc.authorization_servers).toEqual(["https://issuer.example"]);
  });

  it("writes with notes:write, reads through the hierarchy, and refuses a read-only token on POST", async () => {
    const writer = await sign("notes:write");
    const post = await fetch(`${notes.url}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${writer}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "hello" }),
    });
    expect(post.status).toBe(201);
    const list = await fetch(`${notes.url}/notes`, { headers: { authorization: `Bearer ${writer}` } });
    expect(await list.json()).toEqual([{ owner: "alice", text: "hello" }]);
    const reader = await sign("notes:read");
    const denied = await fetch(`${notes.url}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${reader}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "x" }),
    });
    expect(denied.status).toBe(403);
  });
});
