/**
 * Token endpoint rate limits that do not punish shared egress: one budget per client (a URL client
 * id counts by its metadata document's host) and a larger one per address, both configurable; a
 * refused request is 429 `temporarily_unavailable` with `Retry-After` and a `rate_limited` audit
 * event.
 */
import { describe, expect, it } from "vitest";
import type { AuditEvent } from "../../../src/authorization-server/core/audit.js";
import { tokenClientRateLimitKey } from "../../../src/authorization-server/core/rate-limit.js";
import {
  basic,
  CONFIDENTIAL_CLIENT,
  CONFIDENTIAL_SECRET,
  formRequest,
  issueCode,
  makeServer,
  PUBLIC_CLIENT,
  REDIRECT,
  RESOURCE,
  RS_CLIENT,
  RS_SECRET,
  type TestServer,
} from "../helpers.js";

async function clientCredentials(
  t: TestServer,
  address: string,
  who: { id: string; secret: string } = { id: CONFIDENTIAL_CLIENT, secret: CONFIDENTIAL_SECRET },
): Promise<Response> {
  const params = { grant_type: "client_credentials", resource: RESOURCE, scope: "notes:read" };
  // The confidential client authenticates with Basic, the resource server's with the form (RFC 6749 §2.3.1).
  const request =
    who.id === RS_CLIENT
      ? formRequest("/token", { ...params, client_id: who.id, client_secret: who.secret })
      : formRequest("/token", params, basic(who.id, who.secret));
  return t.server.fetch(request, { clientAddress: address });
}

describe("token endpoint rate limits", () => {
  it("limits one client across addresses, and leaves other clients on the same address alone", async () => {
    const events: AuditEvent[] = [];
    const t = await makeServer({
      tokenRateLimit: { perClientPerMinute: 3, perAddressPerMinute: 1000 },
      onAuditEvent: (e) => void events.push(e),
    });
    for (const address of ["10.0.0.1", "10.0.0.2", "10.0.0.3"]) {
      expect((await clientCredentials(t, address)).status).toBe(200);
    }
    const refused = await clientCredentials(t, "10.0.0.4");
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: string }).error).toBe("temporarily_unavailable");
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get("cache-control")).toContain("no-store");
    expect(events.filter((e) => e.type === "rate_limited")).toEqual([
      expect.objectContaining({ limit: "token", key_kind: "client", client_id: CONFIDENTIAL_CLIENT }),
    ]);
    // Another client behind the same address (shared egress) is not refused.
    const other = await clientCredentials(t, "10.0.0.4", { id: RS_CLIENT, secret: RS_SECRET });
    expect(other.status).toBe(200);
    // The window slides: a minute and a bit later the client is served again.
    t.clock.advance(125);
    expect((await clientCredentials(t, "10.0.0.4")).status).toBe(200);
  });

  it("hostile: a public client's id is not a budget anyone can spend (no per-client limit without authentication)", async () => {
    const t = await makeServer({ tokenRateLimit: { perClientPerMinute: 2, perAddressPerMinute: 1000 } });
    // An attacker replays the public client's id from many addresses: without a secret, counting
    // these against the client would lock out every user of the application.
    for (const address of ["10.0.1.1", "10.0.1.2", "10.0.1.3", "10.0.1.4"]) {
      const junk = formRequest("/token", {
        grant_type: "authorization_code",
        client_id: PUBLIC_CLIENT,
        code: "not-a-code",
        code_verifier: "v".repeat(43),
        redirect_uri: REDIRECT,
        resource: RESOURCE,
      });
      expect((await t.server.fetch(junk, { clientAddress: address })).status).toBe(400);
    }
    // The real user still redeems a code.
    const { code, verifier } = await issueCode(t);
    const real = formRequest("/token", {
      grant_type: "authorization_code",
      client_id: PUBLIC_CLIENT,
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      resource: RESOURCE,
    });
    expect((await t.server.fetch(real, { clientAddress: "10.0.9.9" })).status).toBe(200);
  });

  it("limits one address before authenticating anyone, and leaves other addresses alone", async () => {
    const t = await makeServer({ tokenRateLimit: { perClientPerMinute: 1000, perAddressPerMinute: 3 } });
    expect((await clientCredentials(t, "192.0.2.7")).status).toBe(200);
    expect((await clientCredentials(t, "192.0.2.7", { id: RS_CLIENT, secret: RS_SECRET })).status).toBe(200);
    expect((await clientCredentials(t, "192.0.2.7", { id: RS_CLIENT, secret: "guess" })).status).toBe(401);
    // Over the address's budget: refused before the secret is checked, so guessing stops here.
    const guess = await clientCredentials(t, "192.0.2.7", { id: RS_CLIENT, secret: "guess-2" });
    expect(guess.status).toBe(429);
    expect(guess.headers.get("retry-after")).not.toBeNull();
    expect((await clientCredentials(t, "192.0.2.8")).status).toBe(200);
  });

  it("0 turns a limit off", async () => {
    const t = await makeServer({ tokenRateLimit: { perClientPerMinute: 0, perAddressPerMinute: 0 } });
    for (let i = 0; i < 5; i++) expect((await clientCredentials(t, "10.1.1.1")).status).toBe(200);
  });

  it("refuses a limit that is not a non-negative integer", async () => {
    for (const bad of [-1, 1.5, "10"]) {
      await expect(
        makeServer({ tokenRateLimit: { perClientPerMinute: bad as number } }),
      ).rejects.toMatchObject({ code: "ERR_INVALID_OPTION" });
    }
  });

  it("counts every client id of one metadata-document host in one budget", () => {
    expect(tokenClientRateLimitKey("https://tools.example/a.json")).toBe(
      tokenClientRateLimitKey("https://TOOLS.example/b/client.json"),
    );
    expect(tokenClientRateLimitKey("https://tools.example/a.json")).not.toBe(
      tokenClientRateLimitKey("https://other.example/a.json"),
    );
    expect(tokenClientRateLimitKey("notes-cli")).not.toBe(tokenClientRateLimitKey("host:notes-cli"));
  });
});
