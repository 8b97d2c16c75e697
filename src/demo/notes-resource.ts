/**
 * The demo protected resource served by `gatehouse demo`: a notes service behind the
 * resource-server gate, kept in memory and, when given a file, persisted there (the demo keeps it
 * in its data directory, next to the users, clients and grants). It only uses the package's public
 * resource-server API.
 */
import { readFileSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";

import {
  type AuthInfo,
  cachedVerifier,
  createResourceServer,
  jwtVerifier,
  type ResourceServer,
  type ResourceServerOptions,
  type Revision,
} from "../resource-server/index.js";
import type { Logger } from "../shared/log.js";
import type { ScopeHierarchy } from "../shared/scopes.js";

export interface NotesResourceOptions {
  /**
   * The canonical URI of the notes resource. When its last path segment is `notes`
   * (`http://localhost:4001/notes`, what the demo uses) the notes are served at exactly that URL,
   * so the URL a user calls is the PRM `resource` (RFC 9728 §3.3); otherwise at `{resource}/notes`
   * (`http://127.0.0.1:4000` → `/notes`, `https://h/tenant-a` → `/tenant-a/notes`).
   */
  resource: string;
  /** A JSON file the notes are loaded from and saved to after each change; default: memory only. */
  notesFile?: string;
  /** The authorization server's issuer identifier (the only trusted issuer; `authorization_servers`). */
  issuer: string;
  /** The issuer's JWKS URI. */
  jwksUri: string;
  /** Default: `notes:admin` ⊃ `notes:write` ⊃ `notes:read`. */
  scopeHierarchy?: ScopeHierarchy | Readonly<Record<string, readonly string[]>>;
  revision?: Revision;
  logger?: Logger;
  /** Passed to the gate: the demo reports refusals to its co-hosted authorization server. */
  onInsufficientScope?: ResourceServerOptions["onInsufficientScope"];
}

export interface NotesResource {
  fetch(request: Request): Promise<Response>;
  /** The underlying gate (metadata URL, resource URI) for callers that need them. */
  readonly resourceServer: ResourceServer;
}

export const NOTES_SCOPES = ["notes:read", "notes:write"] as const;

export const NOTES_SCOPE_HIERARCHY: Readonly<Record<string, readonly string[]>> = {
  "notes:admin": ["notes:write"],
  "notes:write": ["notes:read"],
};

interface Note {
  id: string;
  text: string;
  createdAt: string;
}

const MAX_NOTE_LENGTH = 2000;

/** The notes file: the next id and each subject's notes. */
interface SavedNotes {
  nextId: number;
  notes: Record<string, Note[]>;
}

/**
 * Reads the notes file (once, at start, so synchronously); a missing file is no notes yet, an
 * unreadable one stops the start.
 */
function loadNotes(file: string): SavedNotes {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { nextId: 1, notes: {} };
    throw error;
  }
  const parsed = JSON.parse(text) as Partial<SavedNotes> | null;
  if (typeof parsed?.nextId !== "number" || typeof parsed.notes !== "object" || parsed.notes === null) {
    throw new Error(`${file} is not a notes file (move it away to start with no notes)`);
  }
  return { nextId: parsed.nextId, notes: parsed.notes };
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "content-type": "application/json", "cache-control": "no-store" },
  });
}

/**
 * Creates the notes service:
 *
 * | route | scope |
 * |---|---|
 * | `GET {resource}/notes` | notes:read |
 * | `POST {resource}/notes` (JSON `{ "text": "..." }`) | notes:write |
 * | `DELETE {resource}/notes` (delete all of the caller's notes) | notes:admin |
 *
 * (`{resource}` itself when it already ends in `/notes`.) Notes are kept per subject (`sub`). The
 * metadata document is served at the RFC 9728 well-known paths; anything else under the origin is 404.
 */
export function createNotesResource(options: NotesResourceOptions): NotesResource {
  const gate = createResourceServer({
    resource: options.resource,
    authorizationServers: [options.issuer],
    scopesSupported: [...NOTES_SCOPES],
    resourceName: "Gatehouse demo notes",
    scopeHierarchy: options.scopeHierarchy ?? NOTES_SCOPE_HIERARCHY,
    revision: options.revision,
    logger: options.logger,
    ...(options.onInsufficientScope ? { onInsufficientScope: options.onInsufficientScope } : {}),
    verifier: cachedVerifier(
      jwtVerifier({ issuer: options.issuer, audience: options.resource, jwksUri: options.jwksUri }),
    ),
  });
  const resourcePath = new URL(gate.resource).pathname.replace(/\/$/, "");
  const notesPath = resourcePath.endsWith("/notes") ? resourcePath : `${resourcePath}/notes`;
  const saved = options.notesFile ? loadNotes(options.notesFile) : { nextId: 1, notes: {} };
  const notesBySubject = new Map<string, Note[]>(Object.entries(saved.notes));
  let nextId = saved.nextId;
  // One write at a time, each replacing the file whole (write, then rename): a crash leaves the old or the new.
  let saving: Promise<void> = Promise.resolve();
  const save = () => {
    const file = options.notesFile;
    if (!file) return Promise.resolve();
    const snapshot: SavedNotes = { nextId, notes: Object.fromEntries(notesBySubject) };
    saving = saving.then(async () => {
      await writeFile(`${file}.tmp`, JSON.stringify(snapshot), { mode: 0o600 });
      await rename(`${file}.tmp`, file);
    });
    return saving;
  };

  const owner = (auth: AuthInfo) => auth.subject ?? `client:${auth.clientId ?? "unknown"}`;

  const readNotes = gate.requireBearer({ scopes: ["notes:read"] });
  const writeNotes = gate.requireBearer({ scopes: ["notes:write"] });
  const adminNotes = gate.requireBearer({ scopes: ["notes:admin"] });

  const list = async (_request: Request, auth: AuthInfo) =>
    json({ notes: notesBySubject.get(owner(auth)) ?? [] });

  const create = async (request: Request, auth: AuthInfo) => {
    const type = request.headers.get("content-type") ?? "";
    if (!/^application\/json\b/i.test(type)) return json({ error: "expected application/json" }, 415);
    let body: unknown;
    try {
      body = await request.json();
    } catch {
      return json({ error: "body is not valid JSON" }, 400);
    }
    const text = (body as { text?: unknown } | null)?.text;
    if (typeof text !== "string" || text.length === 0 || text.length > MAX_NOTE_LENGTH) {
      return json({ error: `text must be a string of 1 to ${MAX_NOTE_LENGTH} characters` }, 400);
    }
    const note: Note = { id: String(nextId++), text, createdAt: new Date().toISOString() };
    const notes = notesBySubject.get(owner(auth)) ?? [];
    notes.push(note);
    notesBySubject.set(owner(auth), notes);
    await save();
    return json(note, 201);
  };

  const clear = async (_request: Request, auth: AuthInfo) => {
    const removed = notesBySubject.get(owner(auth))?.length ?? 0;
    notesBySubject.delete(owner(auth));
    await save();
    return json({ removed });
  };

  return {
    resourceServer: gate,
    async fetch(request: Request): Promise<Response> {
      if (gate.handles(request)) return gate.metadataResponse(request);
      const { pathname } = new URL(request.url);
      if (pathname !== notesPath) return json({ error: "not found" }, 404);
      switch (request.method) {
        case "GET":
          return readNotes(request, list);
        case "POST":
          return writeNotes(request, create);
        case "DELETE":
          return adminNotes(request, clear);
        default:
          return new Response(null, { status: 405, headers: { allow: "GET, POST, DELETE" } });
      }
    },
  };
}
