/**
 * A protected "notes" API in one file, using only the package's public API.
 *
 *   GET  /notes   needs notes:read
 *   POST /notes   needs notes:write (which implies notes:read)
 *
 * Run it against your authorization server, on Node 20 or newer (`npm run build` first so
 * `gatehouse-auth/*` resolves; README.md has the settings and the whole walk-through):
 *
 *   ISSUER=http://localhost:9000 JWKS_URI=http://localhost:9000/jwks.json PORT=3000 \
 *     node --import ./scripts/typescript.mjs examples/notes/server.ts
 *
 * or without one (SELF_ISSUE=1): the example then signs a sample token itself and prints it.
 */
import { pathToFileURL } from "node:url";
import { listen } from "gatehouse-auth/node";
import {
  type AuthInfo,
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
} from "gatehouse-auth/resource-server";
import { exportJWK, generateKeyPair, type JSONWebKeySet, SignJWT } from "jose";

export interface NotesExample {
  url: string;
  gate: ResourceServer;
  close(): Promise<void>;
}

/** Starts the notes API on `port` (0 = any) trusting `issuer`, whose keys are `jwks` or at `jwksUri`. */
export async function startNotes(options: {
  issuer: string;
  jwksUri?: string;
  jwks?: JSONWebKeySet;
  port?: number;
}): Promise<NotesExample> {
  // The resource URI must be known before the gate exists; take the port first.
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 });
  const server = await listen((request) => handler(request), { port: options.port ?? 0 });
  const resource = server.url;

  const gate = createResourceServer({
    resource,
    authorizationServers: [options.issuer],
    scopesSupported: ["notes:read", "notes:write"],
    scopeHierarchy: { "notes:write": ["notes:read"] },
    resourceName: "Notes example",
    verifier: cachedVerifier(
      jwtVerifier({
        issuer: options.issuer,
        audience: resource,
        jwksUri: options.jwksUri,
        jwks: options.jwks,
      }),
    ),
  });

  const notes: { owner: string | undefined; text: string }[] = [];
  const read = gate.requireBearer({ scopes: ["notes:read"] });
  const write = gate.requireBearer({ scopes: ["notes:write"] });
  const list = async (_request: Request, auth: AuthInfo) =>
    Response.json(notes.filter((n) => n.owner === auth.subject));
  const add = async (request: Request, auth: AuthInfo) => {
    const { text } = (await request.json()) as { text?: unknown };
    if (typeof text !== "string" || text === "")
      return Response.json({ error: "text required" }, { status: 400 });
    notes.push({ owner: auth.subject, text });
    return Response.json({ ok: true }, { status: 201 });
  };

  handler = async (request) => {
    if (gate.handles(request)) return gate.metadataResponse(request);
    if (new URL(request.url).pathname !== "/notes") return new Response("not found", { status: 404 });
    if (request.method === "GET") return read(request, list);
    if (request.method === "POST") return write(request, add);
    return new Response(null, { status: 405 });
  };
  return { url: resource, gate, close: () => server.close() };
}

async function main(): Promise<void> {
  if (process.env.SELF_ISSUE) {
    const { publicKey, privateKey } = await generateKeyPair("ES256");
    const issuer = "https://issuer.example";
    const jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: "example", alg: "ES256" }] };
    const notes = await startNotes({ issuer, jwks, port: Number(process.env.PORT ?? 3000) });
    const token = await new SignJWT({ sub: "alice", client_id: "example", scope: "notes:write" })
      .setProtectedHeader({ alg: "ES256", typ: "at+jwt", kid: "example" })
      .setIssuer(issuer)
      .setAudience(notes.url)
      .setExpirationTime("1h")
      .sign(privateKey);
    console.log(
      `notes API on ${notes.url}\n\ncurl -i ${notes.url}/notes\ncurl -H "Authorization: Bearer ${token}" ${notes.url}/notes`,
    );
    return;
  }
  const issuer = process.env.ISSUER;
  const jwksUri = process.env.JWKS_URI;
  if (!issuer || !jwksUri) throw new Error("set ISSUER and JWKS_URI (or SELF_ISSUE=1)");
  const notes = await startNotes({ issuer, jwksUri, port: Number(process.env.PORT ?? 3000) });
  console.log(`notes API on ${notes.url}; metadata at ${notes.gate.resourceMetadataUrl}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
