/**
 * Hostile review finding: the client read remote bodies without a limit (a 300 MB protected
 * resource metadata document was read whole before being refused; a 200 MB `access_token` was
 * sent as an Authorization header). Every body the client reads is read as a stream with a
 * per-document cap and abandoned past it, a declared Content-Length over the cap is refused before
 * reading, and token values have a length cap. Real loopback servers count what they managed to
 * send, so "abandoned at the cap" is told apart from "read to the end, then refused".
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  AuthClient,
  AuthorizationFlowError,
  clientCredentialsGrant,
  enterpriseManagedGrant,
  jwtBearerGrant,
  MemoryTokenStore,
} from "../../../src/client/index.js";
import { followRedirect } from "../fixtures.js";
import {
  ENDLESS_BYTES,
  type HostileBody,
  type HostileRoute,
  type OversizeServer,
  startOversizeServer,
} from "./oversize-fixture.js";

const REDIRECT = "http://127.0.0.1:9/callback";
const KiB = 1024;
let server: OversizeServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function failure(promise: Promise<unknown>): Promise<AuthorizationFlowError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AuthorizationFlowError);
  return error as AuthorizationFlowError;
}

const interactive = () => new AuthClient({ redirectUri: REDIRECT, userAgent: followRedirect });

/** Logs in, then logs out; a failed revocation is rethrown so the case reads like the others. */
async function logoutAfterLogin(s: OversizeServer): Promise<void> {
  const client = interactive();
  const response = await client.fetch(s.resourceUrl);
  expect(response.status).toBe(200);
  await response.body?.cancel();
  const { outcomes } = await client.logout();
  expect(outcomes).toHaveLength(1);
  if (outcomes[0]!.revocation === "failed") throw outcomes[0]!.error;
}

/** Logs in with a token that expires at once, then calls again, which refreshes first. */
async function refreshAfterLogin(s: OversizeServer, store = new MemoryTokenStore()): Promise<void> {
  const client = new AuthClient({
    store,
    redirectUri: REDIRECT,
    userAgent: followRedirect,
    refreshSkewSeconds: 60,
  });
  const first = await client.fetch(s.resourceUrl);
  expect(first.status).toBe(200);
  await first.body?.cancel();
  await client.fetch(s.resourceUrl);
}

interface DocumentCase {
  name: string;
  route: HostileRoute;
  /** The document's name and cap as the error states them. */
  document: string;
  cap: string;
  path: string;
  /** JSON around the endless run of "a"s, so that the body is a valid document if read whole. */
  prefix: (base: string) => string;
  run: (s: OversizeServer) => Promise<unknown>;
}

const tokenPrefix = () => '{"token_type":"Bearer","expires_in":3600,"access_token":"';
const cases: DocumentCase[] = [
  {
    name: "protected resource metadata",
    route: "prm",
    document: "protected resource metadata",
    cap: "64 KiB",
    path: "/.well-known/oauth-protected-resource/mcp",
    prefix: (b) => `{"resource":"${b}/mcp","authorization_servers":["${b}"],"padding":"`,
    run: (s) => interactive().fetch(s.resourceUrl),
  },
  {
    name: "authorization server metadata",
    route: "as-metadata",
    document: "authorization server metadata",
    cap: "128 KiB",
    path: "/.well-known/oauth-authorization-server",
    prefix: (b) => `{"issuer":"${b}","code_challenge_methods_supported":["S256"],"padding":"`,
    run: (s) => interactive().fetch(s.resourceUrl),
  },
  {
    name: "registration response (RFC 7591)",
    route: "register",
    document: "registration response",
    cap: "64 KiB",
    path: "/register",
    prefix: () => '{"client_id":"',
    run: (s) => interactive().fetch(s.resourceUrl),
  },
  {
    name: "token response, authorization code",
    route: "token",
    document: "token response",
    cap: "64 KiB",
    path: "/token",
    prefix: tokenPrefix,
    run: (s) => interactive().fetch(s.resourceUrl),
  },
  {
    name: "token response, refresh",
    route: "refresh",
    document: "token response",
    cap: "64 KiB",
    path: "/token",
    prefix: tokenPrefix,
    run: (s) => refreshAfterLogin(s),
  },
  {
    name: "token response, client credentials",
    route: "token",
    document: "token response",
    cap: "64 KiB",
    path: "/token",
    prefix: tokenPrefix,
    run: (s) =>
      new AuthClient({ grant: clientCredentialsGrant({ clientId: "svc", clientSecret: "s3cret" }) }).fetch(
        s.resourceUrl,
      ),
  },
  {
    name: "token response, JWT bearer",
    route: "token",
    document: "token response",
    cap: "64 KiB",
    path: "/token",
    prefix: tokenPrefix,
    run: (s) =>
      new AuthClient({ grant: jwtBearerGrant({ clientId: "wl", assertion: "a.b.c" }) }).fetch(s.resourceUrl),
  },
  {
    name: "identity provider token exchange (enterprise-managed)",
    route: "idp-token",
    document: "token exchange response",
    cap: "64 KiB",
    path: "/idp/token",
    prefix: tokenPrefix,
    run: (s) =>
      new AuthClient({
        grant: enterpriseManagedGrant({
          idpTokenEndpoint: `${s.base}/idp/token`,
          idpClientId: "idp-client",
          idToken: "id.token.value",
          clientId: "mcp-client",
          clientSecret: "s3cret",
        }),
      }).fetch(s.resourceUrl),
  },
  {
    name: "revocation response (RFC 7009)",
    route: "revoke",
    document: "revocation response",
    cap: "16 KiB",
    path: "/revoke",
    prefix: () => '{"padding":"',
    run: logoutAfterLogin,
  },
];

async function startWith(route: HostileRoute, body: (base: string) => HostileBody, expiresIn?: number) {
  server = await startOversizeServer(
    (base) => ({ [route]: body(base) }),
    expiresIn === undefined ? {} : { expiresIn },
  );
  return server;
}

function expectNamedCapError(error: AuthorizationFlowError, c: DocumentCase, s: OversizeServer): void {
  expect(error.code).toBe("response_too_large");
  expect(error.message).toContain(`the ${c.document} at ${s.base}${c.path} is larger than ${c.cap}`);
  // Nothing of the body reaches the message.
  expect(error.message).not.toMatch(/aaaa/);
}

function expectNoTokenPresented(s: OversizeServer): void {
  // Only the fixture's own short tokens ("Bearer at-N") ever reached the resource.
  expect(s.authorizedResourceRequests.every((length) => length < 32)).toBe(true);
  expect(s.parserRejections).toEqual([]);
}

describe("every body the client reads is capped and abandoned past the cap", () => {
  it.each(cases)(
    "$name: an endless body fails with the named cap and the connection is dropped early",
    async (c) => {
      const s = await startWith(
        c.route,
        (base) => ({ kind: "endless", prefix: c.prefix(base), suffix: '"}' }),
        c.route === "refresh" ? 1 : undefined,
      );
      const error = await failure(c.run(s));
      expectNamedCapError(error, c, s);
      expect(s.answers).toHaveLength(1);
      const answer = s.answers[0]!;
      // The client hung up: the server could not finish, and sent a small fraction of the body
      // (what the socket buffers held when the reader was cancelled).
      expect((await answer.closed).complete).toBe(false);
      expect(answer.written).toBeLessThan(ENDLESS_BYTES / 8);
      expectNoTokenPresented(s);
    },
  );

  it.each(cases)("$name: a Content-Length over the cap is refused before any body is read", async (c) => {
    const s = await startWith(
      c.route,
      () => ({ kind: "declared", length: 100 * 1024 * 1024 }),
      c.route === "refresh" ? 1 : undefined,
    );
    const error = await failure(c.run(s));
    expectNamedCapError(error, c, s);
    const answer = s.answers[0]!;
    expect((await answer.closed).complete).toBe(false);
    expect(answer.written).toBe(0);
    expectNoTokenPresented(s);
  });

  it("the cap is inclusive: a protected resource metadata document of exactly 64 KiB is used, one byte more is refused", async () => {
    const sized = (base: string, bytes: number) => {
      const head = { resource: `${base}/mcp`, authorization_servers: [base], padding: "" };
      const padding = "x".repeat(bytes - Buffer.byteLength(JSON.stringify(head)));
      return { kind: "json" as const, value: { ...head, padding } };
    };
    const exact = await startWith("prm", (base) => sized(base, 64 * KiB));
    const response = await interactive().fetch(exact.resourceUrl);
    expect(response.status).toBe(200);
    expect(exact.answers[0]!.written).toBe(64 * KiB);
    await exact.close();

    const over = await startWith("prm", (base) => sized(base, 64 * KiB + 1));
    const error = await failure(interactive().fetch(over.resourceUrl));
    expect(error.code).toBe("response_too_large");
    expect(error.message).toContain("larger than 64 KiB");
  });
});

describe("token values are length-capped before anything uses them", () => {
  const normal = { token_type: "Bearer", expires_in: 3600, access_token: "at-x", refresh_token: "rt-x" };

  it("a 200 MB-class access_token in an endless token response is never presented to the resource", async () => {
    const s = await startWith("token", () => ({ kind: "endless", prefix: tokenPrefix(), suffix: '"}' }));
    const error = await failure(interactive().fetch(s.resourceUrl));
    expect(error.code).toBe("response_too_large");
    expect(s.authorizedResourceRequests).toEqual([]);
    expect(s.parserRejections).toEqual([]);
  });

  it.each(["access_token", "refresh_token", "id_token"])(
    "a %s over 16 KiB in a token response under the body cap is refused, and no token is presented",
    async (field) => {
      const long = "a".repeat(16 * KiB + 1);
      const s = await startWith("token", () => ({ kind: "json", value: { ...normal, [field]: long } }));
      const error = await failure(interactive().fetch(s.resourceUrl));
      expect(error.code).toBe("response_too_large");
      expect(error.message).toContain(
        `the ${field} in the token response at ${s.base}/token is longer than 16 KiB`,
      );
      expect(error.message).not.toMatch(/aaaa/);
      expect(s.authorizedResourceRequests).toEqual([]);
    },
  );

  it("a refresh response with an over-long access_token is refused; the stored refresh token is kept", async () => {
    const s = await startWith(
      "refresh",
      () => ({ kind: "json", value: { ...normal, access_token: "a".repeat(20 * KiB) } }),
      1,
    );
    const store = new MemoryTokenStore();
    const error = await failure(refreshAfterLogin(s, store));
    expect(error.code).toBe("response_too_large");
    expect(error.message).toContain("the access_token in the token response");
    expect(s.authorizedResourceRequests.every((length) => length < 32)).toBe(true);
    const kept = (await store.list("tokens"))[0]?.[1];
    expect(kept?.refresh_token).toBe("rt-1");
  });

  it("a 16 KiB access_token (a large real-world JWT with margin) is accepted and presented", async () => {
    const token = `at-${"b".repeat(16 * KiB - 3)}`;
    const s = await startWith("token", () => ({ kind: "json", value: { ...normal, access_token: token } }));
    const response = await interactive().fetch(s.resourceUrl);
    expect(response.status).toBe(200);
    expect(s.authorizedResourceRequests).toEqual([`Bearer ${token}`.length]);
  });
});
