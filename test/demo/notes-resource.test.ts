import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createNotesResource } from "../../src/demo/notes-resource.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { startIssuer, type TestIssuer } from "../resource-server/fixtures.js";

let issuer: TestIssuer;
let server: ListeningServer;
let resource: string;

beforeAll(async () => {
  issuer = await startIssuer();
  // The resource URI is only known once the port is: route through a holder.
  let handler: (r: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  server = await listen((r) => handler(r));
  resource = server.url;
  const notes = createNotesResource({ resource, issuer: issuer.issuer, jwksUri: issuer.jwksUri });
  handler = (r) => notes.fetch(r);
});
afterAll(async () => {
  await server.close();
  await issuer.close();
});

const token = (scope: string, sub = "alice") =>
  issuer.sign({ sub, scope, aud: resource, client_id: "demo-client" });

describe("demo notes resource", () => {
  it("serves its protected resource metadata with the issuer as authorization server", async () => {
    const res = await fetch(`${resource}/.well-known/oauth-protected-resource`);
    expect(res.status).toBe(200);
    const doc = await res.json();
    expect(doc).toMatchObject({
      resource,
      authorization_servers: [issuer.issuer],
      scopes_supported: ["notes:read", "notes:write"],
      bearer_methods_supported: ["header"],
    });
  });

  it("challenges an anonymous GET /notes with 401, resource_metadata and scope notes:read", async () => {
    const res = await fetch(`${resource}/notes`);
    expect(res.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
    expect(challenge?.params).toEqual({
      resource_metadata: `${resource}/.well-known/oauth-protected-resource`,
      scope: "notes:read",
    });
  });

  it("lets notes:write create and (through the hierarchy) read notes, per subject", async () => {
    const writer = await token("notes:write");
    const created = await fetch(`${resource}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${writer}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "buy milk" }),
    });
    expect(created.status).toBe(201);
    const list = await fetch(`${resource}/notes`, { headers: { authorization: `Bearer ${writer}` } });
    expect(list.status).toBe(200);
    expect((await list.json()).notes.map((n: { text: string }) => n.text)).toEqual(["buy milk"]);
    const other = await fetch(`${resource}/notes`, {
      headers: { authorization: `Bearer ${await token("notes:read", "bob")}` },
    });
    expect((await other.json()).notes).toEqual([]);
  });

  it("answers notes:read on POST with 403 insufficient_scope naming notes:write", async () => {
    const res = await fetch(`${resource}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${await token("notes:read")}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "x" }),
    });
    expect(res.status).toBe(403);
    const [challenge] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
    expect(challenge?.params.error).toBe("insufficient_scope");
    expect(challenge?.params.scope).toBe("notes:write");
  });

  it("lets notes:admin delete notes (admin implies write implies read)", async () => {
    const admin = await token("notes:admin", "carol");
    const post = await fetch(`${resource}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "temp" }),
    });
    expect(post.status).toBe(201);
    const del = await fetch(`${resource}/notes`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(await del.json()).toEqual({ removed: 1 });
  });

  it("rejects invalid note bodies with 400 and unknown paths with 404", async () => {
    const writer = await token("notes:write");
    const bad = await fetch(`${resource}/notes`, {
      method: "POST",
      headers: { authorization: `Bearer ${writer}`, "content-type": "application/json" },
      body: JSON.stringify({ text: 42 }),
    });
    expect(bad.status).toBe(400);
    expect((await fetch(`${resource}/elsewhere`)).status).toBe(404);
  });
});

describe("demo notes resource with a path and a notes file (what gatehouse demo runs)", () => {
  let dir: string;
  let pathServer: ListeningServer;
  let handler: (r: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  let notesUrl: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "gatehouse-notes-"));
    pathServer = await listen((r) => handler(r));
    notesUrl = `${pathServer.url}/notes`;
  });
  afterAll(async () => {
    await pathServer.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = () =>
    createNotesResource({
      resource: notesUrl,
      issuer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      notesFile: join(dir, "notes.json"),
    });
  const bearer = async (scope: string) => ({
    authorization: `Bearer ${await issuer.sign({ sub: "dana", scope, aud: notesUrl, client_id: "demo-client" })}`,
  });

  it("serves the notes at the resource URL itself, whose PRM names exactly that URL (RFC 9728 §3.3)", async () => {
    const notes = start();
    handler = (r) => notes.fetch(r);
    const res = await fetch(notesUrl);
    expect(res.status).toBe(401);
    const [challenge] = parseWWWAuthenticate(res.headers.get("www-authenticate") ?? "");
    const prm = (await (await fetch(challenge?.params.resource_metadata ?? "")).json()) as {
      resource: string;
    };
    expect(prm.resource).toBe(notesUrl);
    expect((await fetch(`${notesUrl}/notes`)).status).toBe(404);
  });

  it("keeps the notes across a restart, in the file (owner-only), and refuses a file that is not one", async () => {
    const first = start();
    handler = (r) => first.fetch(r);
    const created = await fetch(notesUrl, {
      method: "POST",
      headers: { ...(await bearer("notes:write")), "content-type": "application/json" },
      body: JSON.stringify({ text: "survives a restart" }),
    });
    expect(created.status).toBe(201);
    expect(statSync(join(dir, "notes.json")).mode & 0o777).toBe(0o600);

    const second = start();
    handler = (r) => second.fetch(r);
    const listed = await fetch(notesUrl, { headers: await bearer("notes:read") });
    const body = (await listed.json()) as { notes: { id: string; text: string }[] };
    expect(body.notes.map((n) => n.text)).toEqual(["survives a restart"]);
    // Ids keep counting after a restart: a new note never reuses one.
    const next = await fetch(notesUrl, {
      method: "POST",
      headers: { ...(await bearer("notes:write")), "content-type": "application/json" },
      body: JSON.stringify({ text: "second" }),
    });
    expect(((await next.json()) as { id: string }).id).not.toBe(body.notes[0]?.id);

    writeFileSync(join(dir, "broken.json"), "[1,2]");
    expect(() =>
      createNotesResource({
        resource: notesUrl,
        issuer: issuer.issuer,
        jwksUri: issuer.jwksUri,
        notesFile: join(dir, "broken.json"),
      }),
    ).toThrow("is not a notes file");
  });
});
