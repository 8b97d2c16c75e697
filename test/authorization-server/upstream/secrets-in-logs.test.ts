/**
 * No upstream secret in Gatehouse's log or audit events: through a completed upstream sign-in and
 * failed ones, nothing logged or audited contains the provider's code, the `state`, the access or
 * ID token, the client secret, or the PKCE verifier (SECURITY.md: never a token, code or secret in
 * logs). The store holds the `state` only as its hash.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../../src/authorization-server/core/audit.js";
import type { Logger } from "../../../src/shared/log.js";
import { Agent } from "../pages/harness.js";
import {
  type Gatehouse,
  pressProviderButton,
  type ScriptedOidc,
  scriptedProviderOptions,
  startGatehouse,
  startScriptedOidc,
  UPSTREAM_CLIENT_SECRET,
  visitProvider,
} from "./support.js";

let idp: ScriptedOidc;
let gatehouse: Gatehouse;
const written: string[] = [];
const events: AuditEvent[] = [];

const capture: Logger = {
  info: (event, fields) => written.push(JSON.stringify({ event, ...fields })),
  warn: (event, fields) => written.push(JSON.stringify({ event, ...fields })),
  error: (event, fields) => written.push(JSON.stringify({ event, ...fields })),
};

beforeAll(async () => {
  idp = await startScriptedOidc();
  gatehouse = await startGatehouse(() => ({
    providers: [scriptedProviderOptions(idp, { createAccounts: true })],
    extra: { logger: capture, onAuditEvent: (event) => void events.push(event) },
  }));
});
afterAll(async () => {
  await gatehouse?.close();
  await idp?.close();
});

describe("upstream secrets never reach the log or the audit trail", () => {
  it("after a sign-in and two failures, no code, state, token, secret or verifier is in any line or event", async () => {
    const secrets: string[] = [UPSTREAM_CLIENT_SECRET];
    const callbacks: string[] = [];
    for (const script of [
      () => {},
      () => {
        idp.claims = (c) => ({ ...c, nonce: "other" });
      },
      () => {
        idp.claims = (c) => ({ ...c, aud: "someone-else" });
      },
    ]) {
      idp.claims = (c) => c;
      script();
      const agent = new Agent(gatehouse.url);
      const back = await visitProvider(await pressProviderButton(agent, "idp"));
      const url = new URL(back.location!);
      secrets.push(url.searchParams.get("code")!, url.searchParams.get("state")!);
      callbacks.push((await agent.get(back.location!)).status.toString());
    }
    expect(callbacks).toEqual(["303", "400", "400"]);
    // The verifiers Gatehouse sent to the token endpoint.
    for (const request of idp.requests.filter((r) => r.path === "/token")) {
      secrets.push(request.params.get("code_verifier")!);
    }
    secrets.push(...idp.issued);
    expect(secrets.length).toBeGreaterThanOrEqual(1 + 3 * 2 + 3 + 6);
    const everything = [...written, ...events.map((e) => JSON.stringify(e))].join("\n");
    expect(everything).toContain("upstream_sign_in_failed");
    expect(everything).toContain("login_succeeded");
    for (const secret of secrets) {
      expect(secret.length).toBeGreaterThan(8);
      expect(everything.includes(secret), "a secret was logged").toBe(false);
    }
  });
});
