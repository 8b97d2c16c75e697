/**
 * Audit events (src/authorization-server/core/audit.ts): a complete server on 127.0.0.1 driven through
 * sign-in, consent, code, refresh, step-up, revocation and the failures an operator looks for;
 * every event reaches the hook and the JSON log as the same value, none carries a secret, and the
 * admin page lists a client's recent events. Plus the trail's bounds and a failing hook.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AUDIT_CLIENTS_REMEMBERED,
  AUDIT_EVENTS_PER_CLIENT,
  type AuditEvent,
  AuditTrail,
} from "../../src/authorization-server/core/audit.js";
import { jsonLogger } from "../../src/shared/log.js";
import { Browser, hiddenFields, obtainCode, redeemCode, refreshGrant, tokenSet } from "../support/flow.js";
import { codeTokens, makeServer, PUBLIC_CLIENT, postToken } from "./helpers.js";
import {
  type AdminServer,
  CLIENT_ID,
  REDIRECT_URI,
  RESOURCE,
  signInForAdmin,
  startAdminServer,
} from "./pages/admin-server.js";

const WRONG_PASSWORD = "wrong-password-guess-4711";

describe("audit events over a full flow and its failures", () => {
  let t: AdminServer;
  const events: AuditEvent[] = [];
  const logLines: Record<string, unknown>[] = [];
  /** Every credential the flow handled: none may appear in an event, a log line or the admin page. */
  const secrets: string[] = [];
  let adminHtml = "";
  let clientEventsHtml = "";

  beforeAll(async () => {
    t = await startAdminServer({
      logger: jsonLogger((line) => void logLines.push(JSON.parse(line))),
      onAuditEvent: (event) => void events.push(event),
      dynamicRegistration: { enabled: true, ratePerHour: 3 },
      clientMetadataDocuments: { trust: { kind: "allow-list", hosts: ["tools.example"] } },
    });
    secrets.push(t.user.password, WRONG_PASSWORD);
    const flow = {
      instanceFor: () => t.url,
      clientId: CLIENT_ID,
      redirectUri: REDIRECT_URI,
      resource: RESOURCE,
      user: t.user,
    };

    // A wrong password first (login_failed), then the real sign-in, consent and code.
    await expect(signInForAdmin(t, { username: t.user.username, password: WRONG_PASSWORD })).rejects.toThrow(
      /POST \/login answered 4/,
    );
    const alice = new Browser();
    const first = await obtainCode({ ...flow, scope: "notes:read offline_access", browser: alice });
    secrets.push(first.code, first.verifier);
    const tokens = await tokenSet(await redeemCode(t.url, flow, first));
    secrets.push(tokens.access_token, tokens.refresh_token ?? "");
    // The same code again: a replay, which revokes that grant.
    expect((await redeemCode(t.url, flow, first)).status).toBe(400);

    // A new grant, refreshed twice (the client moved on to the successor); then the first rotated
    // token presented again (reuse).
    const second = await obtainCode({ ...flow, scope: "notes:read offline_access", browser: alice });
    secrets.push(second.code, second.verifier);
    const granted = await tokenSet(await redeemCode(t.url, flow, second));
    const refreshed = await tokenSet(await refreshGrant(t.url, CLIENT_ID, granted.refresh_token ?? ""));
    secrets.push(granted.access_token, granted.refresh_token ?? "", refreshed.access_token);
    secrets.push(refreshed.refresh_token ?? "");
    const movedOn = await tokenSet(await refreshGrant(t.url, CLIENT_ID, refreshed.refresh_token ?? ""));
    secrets.push(movedOn.access_token, movedOn.refresh_token ?? "");
    expect((await refreshGrant(t.url, CLIENT_ID, granted.refresh_token ?? "")).status).toBe(400);

    // A step-up in the same sign-in supersedes the narrower grant; the client then revokes the new one.
    const narrow = await tokenSet(
      await redeemCode(
        t.url,
        flow,
        await obtainCode({ ...flow, scope: "notes:read offline_access", browser: alice }),
      ),
    );
    // The step-up is this instance's: a co-hosted resource refused its token for insufficient scope.
    const narrowJti = JSON.parse(Buffer.from(narrow.access_token.split(".")[1]!, "base64url").toString()).jti;
    expect(await t.server.requestStepUp(narrowJti)).toBe(true);
    const upCode = await obtainCode({ ...flow, scope: "notes:write offline_access", browser: alice });
    secrets.push(upCode.code, upCode.verifier, narrow.access_token, narrow.refresh_token ?? "");
    const wide = await tokenSet(await redeemCode(t.url, flow, upCode));
    secrets.push(wide.access_token, wide.refresh_token ?? "");
    const revoked = await fetch(`${t.url}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: wide.refresh_token ?? "", client_id: CLIENT_ID }).toString(),
    });
    expect(revoked.status).toBe(200);

    // Registration: one with a secret, one refused, then the per-address limit (3 an hour).
    const register = (body: Record<string, unknown>) =>
      fetch(`${t.url}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const confidential = await register({
      redirect_uris: ["https://app.example/cb"],
      token_endpoint_auth_method: "client_secret_basic",
    });
    expect(confidential.status).toBe(201);
    secrets.push(((await confidential.json()) as { client_secret: string }).client_secret);
    expect(
      (await register({ redirect_uris: ["https://app.example/cb"], jwks_uri: "https://x" })).status,
    ).toBe(400);
    expect((await register({ redirect_uris: ["https://app.example/cb"] })).status).toBe(201);
    const limited = await register({ redirect_uris: ["https://app.example/cb"] });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);

    // A metadata document from a host the trust policy refuses.
    const refusedDocument = await alice.request(
      `${t.url}/authorize?${new URLSearchParams({
        response_type: "code",
        client_id: "https://refused.example/client.json",
        redirect_uri: "https://refused.example/cb",
        code_challenge: "x".repeat(43),
        code_challenge_method: "S256",
        resource: RESOURCE,
      })}`,
    );
    expect(refusedDocument.status).toBe(400);

    // The administrator withdraws alice's consent, then looks at the page and at the client's events.
    const admin = (await signInForAdmin(t, t.admin)).browser;
    secrets.push(...admin.cookies.values(), ...alice.cookies.values());
    const page = await (await admin.request(`${t.url}/admin`)).text();
    // The table's button opens a review (a GET form); the review carries the POST form that acts.
    const button = page
      .split("<form")
      .find((f) => f.includes('value="revoke-consent"') && f.includes(`value="${t.user.id}"`));
    expect(button).toBeDefined();
    const buttonFields = hiddenFields(`<form${button!.split("</form>")[0]}`);
    const review = await (await admin.request(`${t.url}/admin?${new URLSearchParams(buttonFields)}`)).text();
    const consentForm = review
      .split("<form")
      .find((f) => f.includes('name="action"') && f.includes('value="revoke-consent"'));
    expect(consentForm).toBeDefined();
    const done = await admin.postForm(
      `${t.url}/admin`,
      hiddenFields(`<form${consentForm!.split("</form>")[0]}`),
    );
    expect(done.status).toBe(303);
    adminHtml = await (await admin.request(`${t.url}/admin`)).text();
    clientEventsHtml = await (
      await admin.request(`${t.url}/admin?${new URLSearchParams({ client: CLIENT_ID })}`)
    ).text();
  });

  afterAll(async () => {
    await t?.close();
  });

  it("records every kind of event the flow caused, in order", () => {
    const types = new Set(events.map((e) => e.type));
    for (const expected of [
      "login_failed",
      "login_succeeded",
      "consent_granted",
      "grant_issued",
      "authorization_code_replayed",
      "grant_refreshed",
      "refresh_token_reused",
      "grant_superseded",
      "grant_revoked",
      "client_registered",
      "client_registration_refused",
      "rate_limited",
      "client_metadata_document_failed",
      "consent_revoked",
    ] as const) {
      expect(types, expected).toContain(expected);
    }
    expect(events.find((e) => e.type === "rate_limited")).toMatchObject({
      limit: "registration",
      key_kind: "address",
      address: "127.0.0.1",
    });
    expect(events.find((e) => e.type === "consent_revoked")).toMatchObject({
      by: "admin",
      client_id: CLIENT_ID,
    });
    expect(events.find((e) => e.type === "grant_revoked")).toMatchObject({
      by: "client",
      client_id: CLIENT_ID,
    });
    expect(events.find((e) => e.type === "client_metadata_document_failed")).toMatchObject({
      host: "refused.example",
      error: "invalid_client",
    });
    const times = events.map((e) => e.at);
    expect(times).toEqual([...times].sort((a, b) => a - b));
  });

  it("writes each event to the JSON log as the same value the hook received", () => {
    const audited = logLines.filter((l) => l.audit === true);
    expect(audited).toHaveLength(events.length);
    audited.forEach((line, i) => {
      const { time: _time, level, event, audit: _audit, ...fields } = line;
      const { type, ...rest } = events[i] as AuditEvent;
      expect(event).toBe(type);
      expect(fields).toEqual(rest);
      expect(level).toBe(type === "login_failed" || type === "rate_limited" ? "warn" : level);
    });
    // The pages' sign-in and consent lines became audit events, not a second plain line.
    expect(logLines.filter((l) => l.event === "login_succeeded" && l.audit !== true)).toEqual([]);
  });

  it("never carries a token, code, verifier, client secret, password or cookie", () => {
    expect(secrets.filter((s) => s.length < 8)).toEqual([]);
    const haystacks = {
      events: JSON.stringify(events),
      log: JSON.stringify(logLines),
      adminPage: adminHtml + clientEventsHtml,
    };
    for (const [where, text] of Object.entries(haystacks)) {
      for (const secret of secrets) expect(text.includes(secret), `${where} carries a secret`).toBe(false);
    }
  });

  it("shows a client's recent events on the admin page, newest first", () => {
    expect(adminHtml).toContain('data-testid="events"');
    expect(adminHtml).toContain(`href="/admin?client=${encodeURIComponent(CLIENT_ID)}#events"`);
    const rows = [...clientEventsHtml.matchAll(/data-testid="event-row" data-event-type="([a-z_]+)"/g)].map(
      (m) => m[1],
    );
    const ofClient = events
      .filter((e) => "client_id" in e && e.client_id === CLIENT_ID)
      .map((e) => e.type)
      .reverse()
      .slice(0, AUDIT_EVENTS_PER_CLIENT);
    expect(rows).toEqual(ofClient);
    expect(rows[0]).toBe("consent_revoked");
    expect(rows).not.toContain("client_registered");
  });
});

describe("audit hook and trail", () => {
  it("a throwing or rejecting hook is logged and never fails the request", async () => {
    for (const onAuditEvent of [
      () => {
        throw new TypeError("hook broke");
      },
      () => Promise.reject(new RangeError("hook rejected")),
    ]) {
      const t = await makeServer({ onAuditEvent });
      const tokens = await codeTokens(t);
      expect(tokens.access_token).toEqual(expect.any(String));
      await new Promise((resolve) => setImmediate(resolve));
      const failures = t.log.lines.filter((l) => l.event === "audit_hook_failed");
      expect(failures.length).toBeGreaterThan(0);
      expect(JSON.stringify(failures)).not.toContain("hook broke");
    }
  });

  it("refuses an onAuditEvent that is not a function", async () => {
    await expect(makeServer({ onAuditEvent: "yes" as never })).rejects.toMatchObject({
      code: "ERR_INVALID_OPTION",
    });
  });

  it("keeps a bounded number of events per client and forgets the least recently active client", () => {
    const trail = new AuditTrail();
    for (let i = 0; i < AUDIT_EVENTS_PER_CLIENT + 5; i++) {
      trail.record({ type: "grant_refreshed", client_id: "busy", grant_id: `g${i}`, at: i });
    }
    const busy = trail.forClient("busy");
    expect(busy).toHaveLength(AUDIT_EVENTS_PER_CLIENT);
    expect(busy[0]).toMatchObject({ grant_id: `g${AUDIT_EVENTS_PER_CLIENT + 4}` });
    for (let i = 0; i < AUDIT_CLIENTS_REMEMBERED; i++) {
      trail.record({ type: "client_deleted", client_id: `c${i}`, by: "admin", at: 1000 + i });
    }
    expect(trail.forClient("busy")).toEqual([]);
    expect(trail.forClient("c0")).toHaveLength(1);
  });
});

describe("Last used", () => {
  it("moves with later token requests, at most once a minute", async () => {
    const t = await makeServer();
    const first = await codeTokens(t);
    const usedAt = (await t.store.getClient(PUBLIC_CLIENT))?.lastUsedAt;
    expect(usedAt).toBe(t.clock.now);
    t.clock.advance(120);
    const refreshed = await postToken(t, {
      grant_type: "refresh_token",
      refresh_token: String(first.refresh_token),
      client_id: PUBLIC_CLIENT,
    });
    expect(refreshed.status).toBe(200);
    expect((await t.store.getClient(PUBLIC_CLIENT))?.lastUsedAt).toBe(t.clock.now);
    const twoMinutesIn = t.clock.now;
    t.clock.advance(10);
    await codeTokens(t);
    expect((await t.store.getClient(PUBLIC_CLIENT))?.lastUsedAt).toBe(twoMinutesIn);
  });
});
