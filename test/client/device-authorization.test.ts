/**
 * The device authorization grant (RFC 8628) against a real upstream: oidc-provider 9 with its
 * `deviceFlow` feature on loopback (test/support/oidc-provider.ts), its verification pages driven
 * by Chromium as a person on another device would: enter nothing (the complete URI carries the
 * code), confirm, sign in, consent, or abort. Covered: a full login whose tokens are stored like the
 * code flow's and then refreshed; DPoP-bound tokens, every poll with a proof (RFC 9449 §5);
 * `slow_down` (+5 s per answer, RFC 8628 §3.5); denial; expiry
 * (the provider's `expired_token`); the abort signal; a server without the endpoint; a registration
 * made by the code flow being replaced by one that allows the device grant.
 */
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  AuthClient,
  AuthorizationFlowError,
  DEVICE_CODE_GRANT_TYPE,
  type DeviceAuthorizationPrompt,
  discoverAuthorizationServer,
  MemoryTokenStore,
  pollDeviceAuthorization,
  registerDynamically,
  requestDeviceAuthorization,
} from "../../src/client/index.js";
import { launchChromium } from "../support/browser.js";
import {
  interactiveUserAgent,
  type OidcProviderFixture,
  type OidcProviderOptions,
  startOidcProvider,
} from "../support/oidc-provider.js";
import { decideOnDevicePage } from "../support/oidc-provider-device-page.js";

let browser: Browser;
let op: OidcProviderFixture | undefined;

beforeAll(async () => {
  browser = await launchChromium();
}, 60_000);
afterEach(async () => {
  await op?.close();
  op = undefined;
});
afterAll(async () => {
  await browser?.close();
});

async function start(options: OidcProviderOptions = {}): Promise<OidcProviderFixture> {
  op = await startOidcProvider({ deviceFlow: {}, ...options });
  return op;
}

/** The person approves or denies on the provider's pages for `prompt`, checking its code. */
function verifyOnAnotherDevice(
  prompt: DeviceAuthorizationPrompt,
  decision: "approve" | "deny",
  screenshot?: string,
): Promise<void> {
  return decideOnDevicePage(browser, prompt.verificationUriComplete ?? prompt.verificationUri, decision, {
    userCode: prompt.userCode,
    ...(screenshot && { screenshot }),
  });
}

/**
 * A fetch that records what the token endpoint answered to each device-code poll (the error code,
 * or "tokens"), and calls `onFirstAnswer` once the first poll has been answered. Requests and
 * responses pass through untouched.
 */
function recordingPolls(issuer: string, onFirstAnswer?: () => void) {
  const answers: string[] = [];
  const fetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const response = await globalThis.fetch(input, init);
    const url = input instanceof Request ? input.url : String(input);
    const body = init?.body instanceof URLSearchParams ? init.body.toString() : String(init?.body ?? "");
    if (url === `${issuer}/token` && body.includes(encodeURIComponent(DEVICE_CODE_GRANT_TYPE))) {
      const json = (await response.clone().json()) as { error?: string };
      answers.push(json.error ?? "tokens");
      if (answers.length === 1) onFirstAnswer?.();
    }
    return response;
  };
  return { answers, fetch };
}

describe("device authorization against oidc-provider", () => {
  it("full login: the prompt, one authorization_pending, approval on another device, the resource accepts the token, which is stored and refreshed", async () => {
    const provider = await start({ accessTokenTtl: 30 });
    const store = new MemoryTokenStore();
    const prompts: DeviceAuthorizationPrompt[] = [];
    let approval: Promise<void> | undefined;
    const events: string[] = [];
    // The person approves only after the first poll was answered, so the flow sees "pending".
    const polls = recordingPolls(provider.issuer, () => {
      approval = verifyOnAnotherDevice(prompts[0]!, "approve", "/tmp/device-oidc-provider-confirm.png");
    });
    const client = new AuthClient({
      store,
      fetch: polls.fetch,
      refreshSkewSeconds: 60,
      deviceAuthorization: { onPrompt: (prompt) => void prompts.push(prompt) },
      onEvent: (e) => events.push(e.type),
    });
    const response = await client.fetch(provider.resourceUrl);
    await approval;
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true, sub: "alice" });
    expect(provider.accepted[0]?.aud).toBe(provider.resourceUrl);

    expect(prompts).toHaveLength(1);
    const prompt = prompts[0]!;
    expect(prompt.issuer).toBe(provider.issuer);
    expect(prompt.resource).toBe(provider.resourceUrl);
    expect(prompt.verificationUri).toBe(`${provider.issuer}/device`);
    expect(new URL(prompt.verificationUriComplete!).searchParams.get("user_code")).toBe(prompt.userCode);
    expect(prompt.expiresAt).toBeGreaterThan(Date.now());
    expect(polls.answers).toEqual(["authorization_pending", "tokens"]);
    expect(events).toEqual(["discovered", "authorization_started", "registered", "authorized"]);

    // Stored as the code flow stores tokens: by issuer, client and the PRM resource.
    const registration = await store.get("client", provider.issuer);
    expect(registration?.source).toBe("dynamic");
    const tokens = (await store.list("tokens"))[0]![1];
    expect(tokens.resource).toBe(provider.resourceUrl);
    expect(tokens.client_id).toBe(registration?.client_id);
    // offline_access went with prompt=consent (OpenID Connect Core §11), so a refresh token came.
    expect(tokens.refresh_token).toBeTruthy();

    // A 30 s token inside a 60 s skew: the next call refreshes, with no new device login.
    const second = await client.fetch(provider.resourceUrl);
    expect(second.status).toBe(200);
    await second.body?.cancel();
    expect(events.filter((e) => e === "refreshed")).toHaveLength(1);
    expect(prompts).toHaveLength(1);
    expect(provider.accepted).toHaveLength(2);
  }, 90_000);

  it("DPoP (RFC 9449 §5): every poll carries a proof (the provider's nonce demanded and sent), and the DPoP-only resource accepts the bound token", async () => {
    const provider = await start({ dpop: { requireNonce: true } });
    const store = new MemoryTokenStore();
    const client = new AuthClient({
      store,
      deviceAuthorization: { onPrompt: (prompt) => verifyOnAnotherDevice(prompt, "approve") },
    });
    const response = await client.fetch(provider.resourceUrl);
    expect(response.status).toBe(200);
    await response.body?.cancel();
    const tokens = (await store.list("tokens"))[0]![1];
    expect(tokens.token_type.toLowerCase()).toBe("dpop");
    expect(tokens.dpop_jkt).toBeTruthy();
    expect(provider.accepted[0]).toMatchObject({ scheme: "DPoP", jkt: tokens.dpop_jkt });
  }, 90_000);

  it("slow_down: each answer adds 5 s to the interval for every later poll (RFC 8628 §3.5)", async () => {
    const provider = await start({ deviceFlow: { slowDownFirstPolls: 2 } });
    const store = new MemoryTokenStore();
    const metadata = await discoverAuthorizationServer({ issuer: provider.issuer, fetch });
    const client = await registerDynamically({
      issuer: provider.issuer,
      metadata,
      store,
      fetch,
      redirectUri: "http://127.0.0.1/callback",
      registrationMetadata: { grant_types: [DEVICE_CODE_GRANT_TYPE, "refresh_token"] },
    });
    const ctx = { metadata, client, fetch };
    const authorization = await requestDeviceAuthorization(ctx, {
      resource: provider.resourceUrl,
      scope: "read",
    });
    expect(authorization.interval).toBe(5); // oidc-provider sends none: RFC 8628 §3.2's default
    // The pauses the flow asks for are recorded (and kept short); the provider answers for real.
    const waits: number[] = [];
    const polls = recordingPolls(provider.issuer);
    let approval: Promise<void> | undefined;
    const response = await pollDeviceAuthorization({ ...ctx, fetch: polls.fetch }, authorization, {
      resource: provider.resourceUrl,
      wait: async (ms) => {
        waits.push(ms);
        if (waits.length === 4) {
          approval = verifyOnAnotherDevice(
            { ...authorization, issuer: provider.issuer, resource: provider.resourceUrl },
            "approve",
          );
          await approval;
        }
        await new Promise((r) => setTimeout(r, 20));
      },
    });
    expect(response.access_token).toBeTruthy();
    expect(polls.answers).toEqual(["slow_down", "slow_down", "authorization_pending", "tokens"]);
    expect(waits).toEqual([5000, 10_000, 15_000, 15_000]);
  }, 90_000);

  it("denial on the verification page: authorization_denied [access_denied], nothing stored", async () => {
    const provider = await start();
    const store = new MemoryTokenStore();
    const client = new AuthClient({
      store,
      deviceAuthorization: { onPrompt: (prompt) => verifyOnAnotherDevice(prompt, "deny") },
    });
    const failure = await client.fetch(provider.resourceUrl).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(AuthorizationFlowError);
    expect((failure as AuthorizationFlowError).code).toBe("authorization_denied");
    expect((failure as AuthorizationFlowError).oauthError?.error).toBe("access_denied");
    expect(await store.list("tokens")).toEqual([]);
  }, 90_000);

  it("expiry: the provider answers expired_token, the flow ends with authorization_timed_out", async () => {
    // The code lives 2 s; the first poll comes after the default 5 s interval.
    const provider = await start({ deviceFlow: { codeTtlSeconds: 2 } });
    const store = new MemoryTokenStore();
    const client = new AuthClient({ store, deviceAuthorization: { onPrompt: () => {} } });
    const failure = await client.fetch(provider.resourceUrl).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(AuthorizationFlowError);
    expect((failure as AuthorizationFlowError).code).toBe("authorization_timed_out");
    expect((failure as AuthorizationFlowError).oauthError?.error).toBe("expired_token");
    expect((failure as Error).message).toContain("expired before the login was approved");
    expect(await store.list("tokens")).toEqual([]);
  }, 60_000);

  it("the abort signal stops the wait: the call rejects with the signal's reason", async () => {
    const provider = await start();
    const controller = new AbortController();
    const reason = new Error("the user pressed Ctrl-C");
    const client = new AuthClient({
      deviceAuthorization: {
        signal: controller.signal,
        onPrompt: () => {
          setTimeout(() => controller.abort(reason), 50);
        },
      },
    });
    await expect(client.fetch(provider.resourceUrl)).rejects.toBe(reason);
  }, 60_000);

  it("a server without device_authorization_endpoint: refused before any registration", async () => {
    op = await startOidcProvider(); // deviceFlow off
    const store = new MemoryTokenStore();
    const client = new AuthClient({ store, deviceAuthorization: { onPrompt: () => {} } });
    const failure = await client.fetch(op.resourceUrl).catch((e: unknown) => e);
    expect((failure as AuthorizationFlowError).code).toBe("no_interactive_authorization");
    expect((failure as Error).message).toContain("publishes no device_authorization_endpoint");
    expect(await store.get("client", op.issuer)).toBeUndefined();
  }, 60_000);

  it("a registration made by the code flow (no device grant) is replaced by one allowing both, once", async () => {
    const provider = await start();
    const store = new MemoryTokenStore();
    const redirect = "http://127.0.0.1:9/callback";
    const browserFlow = new AuthClient({
      store,
      redirectUri: redirect,
      userAgent: interactiveUserAgent(redirect),
    });
    const first = await browserFlow.fetch(provider.resourceUrl);
    expect(first.status).toBe(200);
    await first.body?.cancel();
    const codeFlowClient = await store.get("client", provider.issuer);
    await store.delete("tokens", (await store.list("tokens"))[0]![0]);

    const device = new AuthClient({
      store,
      deviceAuthorization: { onPrompt: (prompt) => verifyOnAnotherDevice(prompt, "approve") },
    });
    const second = await device.fetch(provider.resourceUrl);
    expect(second.status).toBe(200);
    await second.body?.cancel();
    const deviceClient = await store.get("client", provider.issuer);
    expect(deviceClient?.client_id).not.toBe(codeFlowClient?.client_id);

    // The new registration still serves the browser flow (loopback redirect, any port).
    await store.clear();
    await store.set("client", provider.issuer, deviceClient!);
    const again = new AuthClient({ store, redirectUri: redirect, userAgent: interactiveUserAgent(redirect) });
    const third = await again.fetch(provider.resourceUrl);
    expect(third.status).toBe(200);
    await third.body?.cancel();
    expect((await store.get("client", provider.issuer))?.client_id).toBe(deviceClient?.client_id);
  }, 120_000);
});
