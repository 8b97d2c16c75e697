/**
 * The multi-instance suite (issue 5 "Several instances"): two `gatehouse serve` processes on one
 * database, requests alternating between them as a load balancer would. Run against PostgreSQL
 * (the backend for several instances) and against one SQLite file shared by two processes on one
 * machine (which BEGIN IMMEDIATE must keep just as correct).
 */
import { createLocalJWKSet, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationStore } from "../../src/storage/contract.js";
import {
  Browser,
  type FlowOptions,
  type FlowStep,
  hiddenFields,
  jwtHeader,
  obtainCode,
  redeemCode,
  refreshGrant,
  tokenSet,
} from "../support/flow.js";
import {
  CLIENT_ID,
  createUsers,
  type Database,
  databaseArgs,
  type Instance,
  openDatabase,
  PASSWORD,
  REDIRECT_URI,
  RESOURCE,
  runCli,
  SCOPES,
  SHARED_ISSUER,
  startInstance,
  stopAll,
  testClient,
} from "../support/instances.js";

export interface DatabaseFixture {
  database: Database;
  cleanup(): Promise<void>;
}

const SCOPE_WITH_REFRESH = `${SCOPES} offline_access`;

export function multiInstanceSuite(name: string, makeDatabase: () => Promise<DatabaseFixture>): void {
  describe(`several instances on one ${name} database`, () => {
    let fixture: DatabaseFixture | undefined;
    let store: AuthorizationStore | undefined;
    let a: Instance;
    let b: Instance;
    let users: string[] = [];
    let nextUser = 0;

    beforeAll(async () => {
      fixture = await makeDatabase();
      store = await openDatabase(fixture.database);
      await store.createClient(testClient());
      users = await createUsers(store, "multi", 8);
      [a, b] = await Promise.all([
        startInstance({ database: fixture.database }),
        startInstance({ database: fixture.database }),
      ]);
    }, 90_000);

    afterAll(async () => {
      await stopAll([a, b]);
      await store?.close();
      await fixture?.cleanup();
    }, 60_000);

    function flow(route: Record<FlowStep, () => Instance>, scope = SCOPE_WITH_REFRESH): FlowOptions {
      const username = users[nextUser++ % users.length]!;
      return {
        instanceFor: (step) => route[step]().base,
        clientId: CLIENT_ID,
        redirectUri: REDIRECT_URI,
        resource: RESOURCE,
        scope,
        user: { username, password: PASSWORD },
      };
    }

    async function jwks(instance: Instance): Promise<{ keys: Record<string, unknown>[] }> {
      const response = await fetch(`${instance.base}/jwks.json`);
      expect(response.status).toBe(200);
      return (await response.json()) as { keys: Record<string, unknown>[] };
    }

    async function verifyOn(instance: Instance, accessToken: string): Promise<void> {
      const set = createLocalJWKSet((await jwks(instance)) as Parameters<typeof createLocalJWKSet>[0]);
      const { payload } = await jwtVerify(accessToken, set, { issuer: SHARED_ISSUER, audience: RESOURCE });
      expect(payload.client_id).toBe(CLIENT_ID);
    }

    it("any instance serves any step: authorize+login on A, consent on B, code at B, refresh at A then B", async () => {
      const options = flow({ authorize: () => a, login: () => a, consent: () => b, token: () => b });
      const obtained = await obtainCode(options);
      const first = await tokenSet(await redeemCode(b.base, options, obtained));
      expect(first.refresh_token).toBeTypeOf("string");
      // Tokens signed by one instance verify against the other's JWKS: signing keys are shared.
      await verifyOn(a, first.access_token);

      const second = await tokenSet(await refreshGrant(a.base, CLIENT_ID, first.refresh_token!));
      await verifyOn(b, second.access_token);
      const third = await tokenSet(await refreshGrant(b.base, CLIENT_ID, second.refresh_token!));
      await verifyOn(a, third.access_token);

      // The session made on A and the consent stored on B let a second request on B go straight
      // back to the client with a code: sessions and consents live in the database.
      const again = await obtainCode({
        ...options,
        instanceFor: () => b.base,
        browser: obtained.browser,
      });
      const fourth = await tokenSet(await redeemCode(a.base, options, again));
      await verifyOn(b, fourth.access_token);
    });

    it("the mirrored route works too: authorize on B, login on A, consent on A, code at A, refresh at B", async () => {
      const options = flow({ authorize: () => b, login: () => a, consent: () => a, token: () => a });
      const obtained = await obtainCode(options);
      const tokens = await tokenSet(await redeemCode(a.base, options, obtained));
      const refreshed = await tokenSet(await refreshGrant(b.base, CLIENT_ID, tokens.refresh_token!));
      await verifyOn(a, refreshed.access_token);
    });

    it("one code redeemed 50 times in parallel across both instances: exactly one success, the rest invalid_grant, the grant then revoked", async () => {
      const options = flow({ authorize: () => a, login: () => b, consent: () => a, token: () => b });
      const obtained = await obtainCode(options);
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) => redeemCode((i % 2 ? a : b).base, options, obtained)),
      );
      const bodies = await Promise.all(responses.map((r) => r.json() as Promise<Record<string, unknown>>));
      const statuses = responses.map((r) => r.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      expect(statuses.filter((s) => s === 400)).toHaveLength(49);
      expect(bodies.filter((b) => b.error === "invalid_grant")).toHaveLength(49);
      // OAuth 2.1 §4.1.3: the replays revoked what the one success issued.
      const winner = bodies.find((b) => typeof b.access_token === "string")!;
      const refresh = await refreshGrant(a.base, CLIENT_ID, winner.refresh_token as string);
      expect(refresh.status).toBe(400);
      expect(((await refresh.json()) as { error: string }).error).toBe("invalid_grant");
    });

    it("one refresh token used 20 times in parallel across both instances: every one answered, then reuse revokes", async () => {
      const options = flow({ authorize: () => b, login: () => b, consent: () => b, token: () => a });
      const tokens = await tokenSet(await redeemCode(a.base, options, await obtainCode(options)));
      const responses = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          refreshGrant((i % 2 ? a : b).base, CLIENT_ID, tokens.refresh_token!),
        ),
      );
      const bodies = await Promise.all(responses.map((r) => r.json() as Promise<Record<string, unknown>>));
      // The refresh race window (grants/refresh-policy.ts): none of the successors was used yet, so
      // every redemption got one, whichever instance served it.
      expect(responses.map((r) => r.status)).toEqual(responses.map(() => 200));
      const successors = bodies.map((b) => b.refresh_token as string);
      expect(new Set(successors).size).toBe(20);
      const onward = await refreshGrant(a.base, CLIENT_ID, successors[0]!);
      expect(onward.status).toBe(200);
      const newest = ((await onward.json()) as { refresh_token: string }).refresh_token;
      // RFC 9700 §4.14.2: a successor was used, so the first token is now reuse on either instance,
      // and it revokes the grant: even the newest token is dead.
      expect((await refreshGrant(b.base, CLIENT_ID, tokens.refresh_token!)).status).toBe(400);
      for (const instance of [a, b]) {
        const next = await refreshGrant(instance.base, CLIENT_ID, newest);
        expect(next.status).toBe(400);
      }
    });

    it("a key rotated through the database is published and used by both instances", async () => {
      const before = new Set((await jwks(a)).keys.map((k) => k.kid));
      // The operator rotates from anywhere that reaches the database: `gatehouse keys rotate`.
      const { kid: newKid } = JSON.parse(
        await runCli(["keys", "rotate", "--json", ...databaseArgs(fixture!.database)]),
      ) as { kid: string };
      expect(before.has(newKid)).toBe(false);

      // Instances cache the key list for a few seconds; wait (bounded) until both publish it.
      const deadline = Date.now() + 20_000;
      for (const instance of [a, b]) {
        let kids = new Set<unknown>();
        while (Date.now() < deadline) {
          kids = new Set((await jwks(instance)).keys.map((k) => k.kid));
          if (kids.has(newKid)) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        expect(kids.has(newKid), `instance ${instance.base} never published the new key`).toBe(true);
        // The retired key stays published: tokens it signed are still valid.
        for (const kid of before) expect(kids.has(kid)).toBe(true);
      }
      // And both sign with it.
      const options = flow({ authorize: () => a, login: () => a, consent: () => b, token: () => a });
      const tokens = await tokenSet(await redeemCode(a.base, options, await obtainCode(options)));
      expect(jwtHeader(tokens.access_token).kid).toBe(newKid);
      const refreshed = await tokenSet(await refreshGrant(b.base, CLIENT_ID, tokens.refresh_token!));
      expect(jwtHeader(refreshed.access_token).kid).toBe(newKid);
      await verifyOn(a, refreshed.access_token);
    });

    it("login rate limits are shared: the 11th failed attempt for one username is refused whichever instance gets it", async () => {
      const victim = (await createUsers(store!, `limited-${Date.now()}`, 1))[0]!;
      const browser = new Browser();
      const options = {
        ...flow({ authorize: () => a, login: () => a, consent: () => a, token: () => a }),
        browser,
      };
      const query = new URLSearchParams({
        response_type: "code",
        client_id: CLIENT_ID,
        redirect_uri: REDIRECT_URI,
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
        resource: RESOURCE,
        scope: options.scope,
      });
      const start = await browser.request(`${a.base}/authorize?${query}`);
      expect(start.status).toBe(303);
      const loginPage = await browser.request(new URL(start.headers.get("location")!, a.base).href);
      const fields = hiddenFields(await loginPage.text());
      const statuses: number[] = [];
      for (let i = 0; i < 11; i++) {
        const instance = i % 2 ? b : a;
        const response = await browser.postForm(`${instance.base}/login`, {
          ...fields,
          username: victim,
          password: "not the password",
        });
        statuses.push(response.status);
      }
      // Ten attempts per username per window (LOGIN_ATTEMPTS_PER_USER), counted in the database.
      expect(statuses.slice(0, 10).every((s) => s === 400)).toBe(true);
      expect(statuses[10]).toBe(429);
    });
  });
}
