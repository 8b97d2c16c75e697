/**
 * Revocation against this repository's authorization server (createAuthorizationServer on the
 * memory store): the grant is really ended, so a refresh afterwards answers `invalid_grant`.
 *
 * The resource (`https://notes.example/api`, the admin fixture's resource) is outside this machine,
 * so the client's fetch routes its origin to a small in-process stand-in: protected resource
 * metadata naming the real authorization server, and a gate that reads the `scope` claim of the
 * real access token. Everything else (metadata, /authorize, login, consent, /token, /revoke) is
 * real HTTP to the real server.
 */
import { afterEach, describe, expect, it } from "vitest";
import { AuthClient, MemoryTokenStore } from "../../src/client/index.js";
import {
  type AdminServer,
  CLIENT_ID,
  obtainGrant,
  REDIRECT_URI,
  RESOURCE,
  startAdminServer,
  tryRefresh,
} from "../authorization-server/pages/admin-server.js";
import { Browser, consentingUserAgent } from "../support/flow.js";

const PRM_URL = "https://notes.example/.well-known/oauth-protected-resource/api";

let server: AdminServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** The stand-in resource: 401 without a token, 403 insufficient_scope for /api/write without notes:write. */
function notesResource(issuer: string) {
  return (request: Request): Response => {
    const url = new URL(request.url);
    if (url.pathname === "/.well-known/oauth-protected-resource/api") {
      return Response.json({
        resource: RESOURCE,
        authorization_servers: [issuer],
        scopes_supported: ["notes:read", "notes:write"],
      });
    }
    const auth = request.headers.get("authorization") ?? "";
    const token = auth.startsWith("Bearer ") ? auth.slice(7) : "";
    const payload = token.split(".")[1];
    if (!payload) {
      return new Response(null, {
        status: 401,
        headers: { "www-authenticate": `Bearer resource_metadata="${PRM_URL}", scope="notes:read"` },
      });
    }
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { scope?: string };
    const scopes = (claims.scope ?? "").split(" ");
    if (url.pathname === "/api/write" && !scopes.includes("notes:write")) {
      return new Response(null, {
        status: 403,
        headers: {
          "www-authenticate": `Bearer error="insufficient_scope", scope="notes:write", resource_metadata="${PRM_URL}"`,
        },
      });
    }
    return Response.json({ ok: true, path: url.pathname });
  };
}

/** A user agent that signs `who` in and approves consent on the real pages, returning the callback. */
function userAgent(t: AdminServer, browser: Browser) {
  return consentingUserAgent(browser, { issuer: t.url, ...t.user, redirectUri: REDIRECT_URI });
}

describe("revocation at this repository's authorization server", () => {
  it("logout revokes the grant: the refresh token then answers invalid_grant", async () => {
    const t = await startAdminServer();
    server = t;
    const { refreshToken, accessToken, grant } = await obtainGrant(t, t.user, new Browser());
    const store = new MemoryTokenStore();
    await store.set("tokens", JSON.stringify([t.url, CLIENT_ID, RESOURCE]), {
      issuer: t.url,
      client_id: CLIENT_ID,
      resource: RESOURCE,
      access_token: accessToken,
      token_type: "Bearer",
      refresh_token: refreshToken,
      expires_at: Date.now() + 60_000,
      obtained_at: Date.now(),
    });
    const client = new AuthClient({ store });
    const result = await client.logout();
    expect(result.outcomes.map((o) => o.revocation)).toEqual(["revoked"]);
    expect(await tryRefresh(t, refreshToken)).toEqual({ status: 400, error: "invalid_grant" });
    const after = (await t.store.listGrants({ userId: t.user.id })).find((g) => g.grantId === grant.grantId);
    expect(after?.revokedAt).toBeTypeOf("number");
  });

  it("a step-up revokes the superseded grant and leaves the new one working", async () => {
    const t = await startAdminServer();
    server = t;
    const notes = notesResource(t.url);
    const browser = new Browser();
    const client = new AuthClient({
      store: new MemoryTokenStore(),
      redirectUri: REDIRECT_URI,
      userAgent: userAgent(t, browser),
      preregisteredClients: { [t.url]: { client_id: CLIENT_ID } },
      revokeSupersededRefreshTokens: true,
      fetch: async (input, init) => {
        const request = new Request(input, init);
        return new URL(request.url).origin === "https://notes.example" ? notes(request) : fetch(request);
      },
    });
    expect((await client.fetch(`${RESOURCE}/read`)).status).toBe(200);
    const [[, first] = []] = await client.store.list("tokens");
    expect(first?.scope?.split(" ")).not.toContain("notes:write");
    const oldRefresh = first?.refresh_token;
    expect(oldRefresh).toBeTypeOf("string");

    // notes:write needs a second consent; the new tokens replace the old ones.
    expect((await client.fetch(`${RESOURCE}/write`)).status).toBe(200);
    await client.idle();
    const [[, second] = []] = await client.store.list("tokens");
    expect(second?.scope?.split(" ")).toContain("notes:write");
    expect(second?.refresh_token).not.toBe(oldRefresh);

    expect(await tryRefresh(t, oldRefresh as string)).toEqual({ status: 400, error: "invalid_grant" });
    const grants = await t.store.listGrants({ userId: t.user.id });
    expect(grants).toHaveLength(2);
    const live = grants.filter((g) => g.revokedAt === undefined);
    expect(live.map((g) => g.scopes.includes("notes:write"))).toEqual([true]);
    // The new refresh token still refreshes.
    expect(await tryRefresh(t, second?.refresh_token as string)).toEqual({ status: 200 });
  });
});
