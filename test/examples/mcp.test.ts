/**
 * examples/mcp end to end on loopback: the example MCP server behind the resource-server gate,
 * the repo's authorization server (memory store, one user), and the example MCP client whose
 * fetch is `createAuthFetch`, driven by an automated user agent that logs in and approves consent
 * by submitting the HTML forms with fetch and a cookie jar.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AuthorizationServer,
  createAuthorizationServer,
  hashPassword,
} from "../../src/authorization-server/index.js";
import type { AuthEvent, CreateAuthFetchOptions } from "../../src/client/index.js";
import { type ListeningServer, listen } from "../../src/http/node.js";
import { silentLogger } from "../../src/shared/log.js";
import { parseWWWAuthenticate } from "../../src/shared/www-authenticate.js";
import { createMemoryStore } from "../../src/storage/memory/index.js";
import { importExample } from "./package-source.js";

type ServerModule = typeof import("../../examples/mcp/server.js");
type ClientModule = typeof import("../../examples/mcp/client.js");

const PASSWORD = "correct horse battery staple";
/** Never contacted: the automated user agent reads the code from the consent answer's Location. */
const REDIRECT_URI = "http://127.0.0.1:1/callback";

/** The pages a user agent went through during one authorization. */
interface Visit {
  login: boolean;
  consent: boolean;
  consentPage: string;
}

/**
 * A browser stand-in: keeps cookies per origin-less jar (one server), never follows redirects
 * itself, submits the login form (hidden fields + username/password) and approves consent.
 */
class FormUserAgent {
  readonly cookies = new Map<string, string>();
  readonly visits: Visit[] = [];

  constructor(
    private readonly username: string,
    private readonly password: string,
  ) {}

  async request(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    if (this.cookies.size) {
      headers.set("cookie", [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; "));
    }
    const response = await fetch(url, { ...init, headers, redirect: "manual" });
    for (const line of response.headers.getSetCookie()) {
      const [pair = "", ...attributes] = line.split(";");
      const eq = pair.indexOf("=");
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const expired = attributes.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === "") this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
    return response;
  }

  /** Hidden inputs of the page's form, entities decoded. */
  static hiddenFields(html: string): Record<string, string> {
    const fields: Record<string, string> = {};
    for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) {
      fields[m[1]!] ??= m[2]!
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&lt;/g, "<")
        .replace(/&gt;/g, ">")
        .replace(/&amp;/g, "&");
    }
    return fields;
  }

  async post(url: string, form: Record<string, string>): Promise<Response> {
    return this.request(url, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form).toString(),
    });
  }

  /** `createAuthFetch`'s `userAgent`: follows the authorization URL to the callback URL. */
  readonly open = async (authorizationUrl: URL): Promise<string> => {
    const visit: Visit = { login: false, consent: false, consentPage: "" };
    this.visits.push(visit);
    let url = authorizationUrl.href;
    for (let step = 0; step < 8; step++) {
      if (url.startsWith(REDIRECT_URI)) return url;
      const response = await this.request(url);
      if (response.status === 303 || response.status === 302) {
        url = new URL(response.headers.get("location")!, url).href;
        continue;
      }
      const html = await response.text();
      if (response.status !== 200) throw new Error(`the authorization server answered ${response.status}`);
      const fields = FormUserAgent.hiddenFields(html);
      const action = new URL(url);
      let answer: Response;
      if (action.pathname.endsWith("/login")) {
        visit.login = true;
        answer = await this.post(new URL("/login", url).href, {
          ...fields,
          username: this.username,
          password: this.password,
        });
      } else if (action.pathname.endsWith("/consent")) {
        visit.consent = true;
        visit.consentPage = html;
        answer = await this.post(new URL("/consent", url).href, { ...fields, decision: "approve" });
      } else {
        throw new Error(`unexpected page ${action.pathname}`);
      }
      if (answer.status !== 303) throw new Error(`form submission answered ${answer.status}`);
      url = new URL(answer.headers.get("location")!, url).href;
    }
    throw new Error("too many steps before the callback");
  };
}

/** Records every exchange the MCP client's authorized fetch makes (to see the 401/403 on the wire). */
function recordingFetch(log: { method: string; url: string; status: number; challenge: string | null }[]) {
  return async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const request = new Request(input, init);
    const response = await fetch(request);
    log.push({
      method: request.method,
      url: request.url,
      status: response.status,
      challenge: response.headers.get("www-authenticate"),
    });
    return response;
  };
}

const REVISIONS = ["2025-11-25", "2026-07-28"] as const;

describe.each(REVISIONS)(
  "examples/mcp: MCP server and client protected by Gatehouse (revision %s)",
  (revision) => {
    let as: AuthorizationServer;
    let asHttp: ListeningServer;
    let mcpHttp: ListeningServer;
    let resource: string;
    let serverModule: ServerModule;
    let clientModule: ClientModule;

    beforeAll(async () => {
      serverModule = await importExample<ServerModule>("examples/mcp/server.ts");
      clientModule = await importExample<ClientModule>("examples/mcp/client.ts");

      // Both servers first listen (port 0) and get their handlers once their URLs are known.
      let asHandler: ((request: Request) => Promise<Response>) | undefined;
      let mcpHandler: ((request: Request) => Promise<Response>) | undefined;
      asHttp = await listen((request) => asHandler!(request));
      mcpHttp = await listen((request) => mcpHandler!(request));
      resource = `${mcpHttp.url}/mcp`;

      const store = createMemoryStore();
      as = await createAuthorizationServer({
        issuer: asHttp.url,
        allowInsecureLoopback: true,
        store,
        resources: [{ uri: resource, name: "Notes (MCP example)", scopes: ["notes:read", "notes:write"] }],
        scopeDescriptions: { "notes:read": "Read your notes", "notes:write": "Add notes" },
        maintenanceIntervalMs: 0,
        logger: silentLogger,
        revision,
      });
      asHandler = as.fetch;
      await store.createUser({
        id: "u-alice",
        username: "alice",
        passwordHash: await hashPassword(PASSWORD),
        isAdmin: false,
        createdAt: Date.now(),
      });

      const jwksUri = await serverModule.discoverJwksUri(asHttp.url);
      const mcp = serverModule.createNotesMcpServer({ resource, issuer: asHttp.url, jwksUri, revision });
      mcpHandler = mcp.fetch;
    });

    afterAll(async () => {
      await as?.close();
      await mcpHttp?.close();
      await asHttp?.close();
    });

    function connect(
      agent: FormUserAgent,
      exchanges: Parameters<typeof recordingFetch>[0],
      events: AuthEvent[],
    ): Promise<Client> {
      const options: CreateAuthFetchOptions = {
        fetch: recordingFetch(exchanges),
        revision,
        redirectUri: REDIRECT_URI,
        userAgent: agent.open,
        onEvent: (event) => events.push(event),
      };
      return clientModule.connectNotesClient(new URL(resource), options);
    }

    it("the endpoint refuses an anonymous MCP request with a 401 pointing at its metadata", async () => {
      const response = await fetch(resource, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "notes.add" } }),
      });
      expect(response.status).toBe(401);
      const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
      expect(challenge?.params.error).toBeUndefined();
      expect(challenge?.params.resource_metadata).toBe(
        `${mcpHttp.url}/.well-known/oauth-protected-resource/mcp`,
      );
      // The scopes of the tool named in the body are announced before any token exists.
      expect(challenge?.params.scope?.split(" ").sort()).toEqual(["notes:read", "notes:write"]);

      const metadata = (await (await fetch(challenge!.params.resource_metadata!)).json()) as Record<
        string,
        unknown
      >;
      expect(metadata.resource).toBe(resource);
      expect(metadata.authorization_servers).toEqual([asHttp.url]);
    });

    it("log in with notes:read, list tools and notes, then step up to notes:write for notes.add", async () => {
      const agent = new FormUserAgent("alice", PASSWORD);
      const exchanges: Parameters<typeof recordingFetch>[0] = [];
      const events: AuthEvent[] = [];
      const client = await connect(agent, exchanges, events);
      try {
        // The first authorization: login page, then consent for notes:read only.
        expect(agent.visits).toHaveLength(1);
        expect(agent.visits[0]).toMatchObject({ login: true, consent: true });
        expect(agent.visits[0]!.consentPage).toContain("Read your notes");
        expect(agent.visits[0]!.consentPage).not.toContain("Add notes");
        const first = events.find((e) => e.type === "authorized");
        expect(first?.type === "authorized" && first.scope?.split(" ")).toContain("notes:read");
        expect(first?.type === "authorized" && first.scope?.split(" ")).not.toContain("notes:write");

        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name).sort()).toEqual(["notes.add", "notes.list"]);
        expect(clientModule.resultText(await client.callTool({ name: "notes.list" }))).toBe("[]");

        const before = exchanges.length;
        const added = await client.callTool({ name: "notes.add", arguments: { text: "buy milk" } });
        expect(added.isError).toBeFalsy();
        expect(clientModule.resultText(added)).toBe("added note 1");

        // On the wire: the read-only token got a 403 insufficient_scope naming notes:write ...
        const refused = exchanges.slice(before).find((x) => x.url === resource && x.status === 403);
        expect(refused).toBeDefined();
        const [challenge] = parseWWWAuthenticate(refused!.challenge ?? "");
        expect(challenge?.params.error).toBe("insufficient_scope");
        expect(challenge?.params.scope?.split(" ")).toContain("notes:write");
        expect(challenge?.params.resource_metadata).toBe(
          `${mcpHttp.url}/.well-known/oauth-protected-resource/mcp`,
        );
        // ... which started a step-up: the signed-in browser skipped the login and saw consent for
        // the new scope; the retried request succeeded.
        const stepUp = events.find((e) => e.type === "authorization_started" && e.stepUp);
        expect(stepUp?.type === "authorization_started" && stepUp.scope?.split(" ")).toContain("notes:write");
        expect(agent.visits).toHaveLength(2);
        expect(agent.visits[1]).toMatchObject({ login: false, consent: true });
        expect(agent.visits[1]!.consentPage).toContain("Add notes");
        const last = exchanges.filter((x) => x.url === resource).at(-1);
        expect(last?.status).toBe(200);

        expect(clientModule.resultText(await client.callTool({ name: "notes.list" }))).toBe('["buy milk"]');
      } finally {
        await client.close();
      }
    });

    it("a token that does not verify is refused with 401 invalid_token before any tool runs", async () => {
      const response = await fetch(resource, {
        method: "POST",
        headers: {
          authorization: "Bearer eyJhbGciOiJFUzI1NiJ9.eyJhdWQiOiJodHRwczovL290aGVyIn0.c2ln",
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(response.status).toBe(401);
      const [challenge] = parseWWWAuthenticate(response.headers.get("www-authenticate") ?? "");
      expect(challenge?.params.error).toBe("invalid_token");
    });
  },
);

describe("examples/mcp: the scopes a request needs", () => {
  let requiredScopes: ServerModule["requiredScopes"];
  beforeAll(async () => {
    ({ requiredScopes } = await importExample<ServerModule>("examples/mcp/server.ts"));
  });
  const post = (body: unknown) =>
    new Request("http://127.0.0.1/mcp", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const call = (name: unknown, id = 1) => ({ jsonrpc: "2.0", id, method: "tools/call", params: { name } });

  it("every request needs the endpoint scope; each tools/call adds its tool's scopes", async () => {
    expect(await requiredScopes(new Request("http://127.0.0.1/mcp"))).toEqual(["notes:read"]);
    expect(await requiredScopes(post({ jsonrpc: "2.0", id: 1, method: "tools/list" }))).toEqual([
      "notes:read",
    ]);
    expect(await requiredScopes(post(call("notes.list")))).toEqual(["notes:read"]);
    expect((await requiredScopes(post(call("notes.add")))).sort()).toEqual(["notes:read", "notes:write"]);
  });

  it("a batch needs the union of its calls' scopes", async () => {
    const scopes = await requiredScopes(post([call("notes.list", 1), call("notes.add", 2)]));
    expect(scopes.sort()).toEqual(["notes:read", "notes:write"]);
  });

  it("unknown tools, prototype names and bodies that are not JSON add nothing (and do not throw)", async () => {
    expect(await requiredScopes(post(call("nope")))).toEqual(["notes:read"]);
    expect(await requiredScopes(post(call("__proto__")))).toEqual(["notes:read"]);
    expect(await requiredScopes(post(call(42)))).toEqual(["notes:read"]);
    expect(await requiredScopes(post("{not json"))).toEqual(["notes:read"]);
  });

  it("reading the scopes leaves the body readable for the MCP transport", async () => {
    const request = post(call("notes.add"));
    await requiredScopes(request);
    expect(((await request.json()) as { params: { name: string } }).params.name).toBe("notes.add");
  });
});
