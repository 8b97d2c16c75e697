/**
 * Issue 26: during an outage the authorization server answers /token with 503
 * `temporarily_unavailable` and Retry-After (RFC 6749 §5.2, RFC 9110 §10.2.3). A refresh is
 * retried once when the wait is short (the server did not answer the grant, so the refresh token
 * is presented again as it would be by the next call anyway); a code redemption never is (a code
 * is used once, RFC 6749 §4.1.2, and the server may have spent it). Either way the stored refresh
 * token survives the outage. Against the loopback authorization server of fixtures.ts, which
 * answers 503 the given number of times once the outage is switched on.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  type AuthorizationFlowError,
  isAuthorizationFlowError,
  MemoryTokenStore,
} from "../../src/client/index.js";
import { type Fake, type FakeOptions, followRedirect, startFake } from "./fixtures.js";

const REDIRECT = "http://127.0.0.1:1/callback";
let fake: Fake | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

type Outage = NonNullable<FakeOptions["unavailable"]>;

/**
 * Logs in with the outage off, moves the stored access token's expiry to `expiresIn` ms from now
 * (default: expired; either way inside the refresh lead, so the next call refreshes first), then
 * switches `outage` on.
 */
async function loggedInThenOutage(outage: Outage, expiresIn = -1000) {
  const options: FakeOptions = {};
  fake = await startFake(options);
  const store = new MemoryTokenStore();
  const events: string[] = [];
  const client = new AuthClient({
    store,
    redirectUri: REDIRECT,
    userAgent: followRedirect,
    onEvent: (e) => events.push(e.type),
  });
  expect((await client.fetch(fake.resourceUrl)).status).toBe(200);
  const [entry] = await store.list("tokens");
  const [tokensKey, stored] = entry!;
  // Obtained an hour ago: the default lead is then the full 30 s (a third of the lifetime at most).
  await store.set("tokens", tokensKey, {
    ...stored,
    obtained_at: Date.now() - 3_600_000,
    expires_at: Date.now() + expiresIn,
  });
  options.unavailable = outage;
  return { client, store, events, stored };
}

const requests = (grant: string) =>
  fake!.seen.token.filter((form) => form.get("grant_type") === grant).length;

async function flowError(promise: Promise<unknown>): Promise<AuthorizationFlowError> {
  const error = await promise.then(
    () => {
      throw new Error("expected a failure");
    },
    (e: unknown) => e,
  );
  if (!isAuthorizationFlowError(error)) throw error;
  return error;
}

describe("503 temporarily_unavailable at the token endpoint", () => {
  it("a refresh answered 503 with Retry-After: 1 is retried once, and the call goes through", async () => {
    const { client, store, events, stored } = await loggedInThenOutage({
      grant: "refresh_token",
      times: 1,
      retryAfter: "1",
    });
    const response = await client.fetch(fake!.resourceUrl);
    expect(response.status).toBe(200);
    expect(requests("refresh_token")).toBe(2);
    expect(events.filter((e) => e === "refreshed")).toHaveLength(1);
    const [[, after]] = (await store.list("tokens")) as [[string, typeof stored]];
    expect(after.access_token).not.toBe(stored.access_token);
    // The fake rotates refresh tokens: the retry presented the same one, which the 503 left unspent.
    expect(fake!.seen.token.slice(-2).map((f) => f.get("refresh_token"))).toEqual([
      stored.refresh_token,
      stored.refresh_token,
    ]);
  });

  it("a second 503 is reported after exactly one retry, and the refresh token is kept", async () => {
    const { client, store, stored } = await loggedInThenOutage({
      grant: "refresh_token",
      times: 2,
      retryAfter: "0",
    });
    const error = await flowError(client.fetch(fake!.resourceUrl));
    expect(error.oauthError?.error).toBe("temporarily_unavailable");
    expect(error.message).toContain("token endpoint temporarily unavailable, retry in 0 s");
    expect(requests("refresh_token")).toBe(2);
    expect(requests("authorization_code")).toBe(1); // the login's: no new login for an outage
    const [[, after]] = (await store.list("tokens")) as [[string, typeof stored]];
    expect(after.refresh_token).toBe(stored.refresh_token);
    // Once the server is back, the kept refresh token works.
    expect((await client.fetch(fake!.resourceUrl)).status).toBe(200);
    expect(requests("refresh_token")).toBe(3);
  });

  it("a Retry-After longer than the bound (5 s) is not waited for: the outage is reported at once", async () => {
    const { client } = await loggedInThenOutage({ grant: "refresh_token", times: 1, retryAfter: "30" });
    const error = await flowError(client.fetch(fake!.resourceUrl));
    expect(error.message).toContain("retry in 30 s");
    expect(requests("refresh_token")).toBe(1);
  });

  it("without Retry-After the refresh is not retried", async () => {
    const { client } = await loggedInThenOutage({ grant: "refresh_token", times: 1 });
    const error = await flowError(client.fetch(fake!.resourceUrl));
    expect(error.message).toContain("retry later");
    expect(requests("refresh_token")).toBe(1);
  });

  it("a refresh ahead of expiry that meets the outage goes on with the access token, still valid", async () => {
    const { client, store, stored } = await loggedInThenOutage(
      { grant: "refresh_token", times: 1, retryAfter: "30" },
      10_000,
    );
    const response = await client.fetch(fake!.resourceUrl);
    expect(response.status).toBe(200);
    expect(requests("refresh_token")).toBe(1);
    const [[, after]] = (await store.list("tokens")) as [[string, typeof stored]];
    expect(after.access_token).toBe(stored.access_token);
    expect(after.refresh_token).toBe(stored.refresh_token);
  });

  it("a code redemption answered 503 is never retried (the code may be spent)", async () => {
    fake = await startFake({ unavailable: { grant: "authorization_code", times: 1, retryAfter: "0" } });
    const client = new AuthClient({
      store: new MemoryTokenStore(),
      redirectUri: REDIRECT,
      userAgent: followRedirect,
    });
    const error = await flowError(client.fetch(fake.resourceUrl));
    expect(error.oauthError?.error).toBe("temporarily_unavailable");
    expect(requests("authorization_code")).toBe(1);
    expect(fake.counts["/authorize"]).toBe(1);
  });
});
