/**
 * TEST-ONLY crash injection for the storage layer, kept under test/ so the package never ships it.
 * Inert unless the environment variable `GATEHOUSE_TEST_FAULT` is set.
 *
 * `withFaultInjection(store)` returns `store` itself when the variable is unset (no wrapper, no
 * cost). When it names one of the {@link FAULT_POINTS}, the returned store kills its own process
 * with SIGKILL (no cleanup, no flush: the closest a test can get to a power cut) the first time the
 * named point is reached. The crash tests in `test/faults/` start `gatehouse serve` through
 * ./serve-with-fault.mjs (the built CLI's serve command with this wrapper) with the variable set, drive a flow to the point, restart without it and check that what the database
 * holds is all-old or all-new (SECURITY.md "Storage, faults and load": a crash at any point leaves
 * a consistent state).
 *
 * The points:
 *
 * - `redeem:after-consume`: inside `redeemAuthorizationCode`'s `check` callback, which every backend
 *   runs inside the redemption transaction after it has read (PostgreSQL: claimed) the unconsumed
 *   code and before the grant and tokens are inserted. The transaction never commits, so after a
 *   restart the code must still be unconsumed and no grant or token of it may exist.
 * - `redeem:after-commit`: after `redeemAuthorizationCode` returned `issued`, before the token
 *   response is written. The client never receives its tokens; they exist, but the client's retry
 *   is a replay that revokes the grant, so none of them stays usable.
 * - `rotate:before-mark`: inside `rotateRefreshToken`'s `check` callback, after the live token and
 *   its grant were read and before the old token is marked rotated or the new one inserted. After a
 *   restart the old token must still work.
 * - `rotate:after-commit`: after `rotateRefreshToken` returned `issued` (old token marked, new one
 *   written), before the response. The undelivered new token was never used, so the client's retry
 *   with the old token inside the refresh race window gets a sibling; once a successor is used, the
 *   old token is reuse and revokes the grant with the undelivered token.
 */
import type { AuthorizationStore, RedeemCodeResult } from "../../src/storage/contract.js";

/** The environment variable that arms a fault point. */
export const FAULT_ENV = "GATEHOUSE_TEST_FAULT";

export const FAULT_POINTS = [
  "redeem:after-consume",
  "redeem:after-commit",
  "rotate:before-mark",
  "rotate:after-commit",
] as const;

export type FaultPoint = (typeof FAULT_POINTS)[number];

function isFaultPoint(value: string): value is FaultPoint {
  return (FAULT_POINTS as readonly string[]).includes(value);
}

/** Ends the process at once: no `exit` handlers, no buffered writes, no transaction commit. */
function crash(): never {
  process.kill(process.pid, "SIGKILL");
  // SIGKILL is delivered before kill() returns on Linux; this line only satisfies the type.
  throw new Error("SIGKILL was not delivered");
}

/**
 * Wraps `store` so the fault point named by `GATEHOUSE_TEST_FAULT` (or `point`, for tests in this
 * process) SIGKILLs the process. Returns `store` unchanged when no point is armed; an unknown name
 * throws, so a mistyped variable cannot silently test nothing.
 */
export function withFaultInjection<S extends AuthorizationStore>(
  store: S,
  point: string | undefined = process.env[FAULT_ENV],
): S {
  if (point === undefined || point === "") return store;
  if (!isFaultPoint(point)) {
    throw new Error(`${FAULT_ENV}=${JSON.stringify(point)} is not one of ${FAULT_POINTS.join(", ")}`);
  }
  // Said loudly on stderr: a process that can kill itself must never pass for a normal one.
  process.stderr.write(
    `gatehouse: TEST FAULT INJECTION ARMED (${point}); this process will SIGKILL itself\n`,
  );

  const redeem = store.redeemAuthorizationCode.bind(store);
  const redeemSealed = store.redeemSealedAuthorizationCode?.bind(store);
  const rotate = store.rotateRefreshToken.bind(store);
  const overrides: Partial<AuthorizationStore> = {};
  // Only a code that would be issued: a refused one changes nothing worth testing.
  const crashingCheck =
    (check: Parameters<AuthorizationStore["redeemAuthorizationCode"]>[2]): typeof check =>
    (code) => {
      const error = check(code);
      if (error === undefined) crash();
      return error;
    };
  const crashIfIssued = (result: RedeemCodeResult) => {
    if (result.status === "issued") crash();
    return result;
  };
  // Both redemptions: a code stored at issue, and a sealed one (the server seals its codes when it
  // has key-encryption keys, as `gatehouse serve` always has).
  switch (point) {
    case "redeem:after-consume":
      overrides.redeemAuthorizationCode = (codeHash, now, check, tokens, supersedes) =>
        redeem(codeHash, now, crashingCheck(check), tokens, supersedes);
      if (redeemSealed) {
        overrides.redeemSealedAuthorizationCode = (code, now, check, tokens, supersedes) =>
          redeemSealed(code, now, crashingCheck(check), tokens, supersedes);
      }
      break;
    case "redeem:after-commit":
      overrides.redeemAuthorizationCode = async (...args) => crashIfIssued(await redeem(...args));
      if (redeemSealed) {
        overrides.redeemSealedAuthorizationCode = async (...args) =>
          crashIfIssued(await redeemSealed(...args));
      }
      break;
    case "rotate:before-mark":
      overrides.rotateRefreshToken = (tokenHash, now, check, tokens, graceMs) =>
        rotate(
          tokenHash,
          now,
          (token, grant) => {
            const verdict = check(token, grant);
            if (verdict.error === undefined) crash();
            return verdict;
          },
          tokens,
          graceMs,
        );
      break;
    case "rotate:after-commit":
      overrides.rotateRefreshToken = async (...args) => {
        const result = await rotate(...args);
        if (result.status === "issued") crash();
        return result;
      };
      break;
  }
  // A proxy keeps every other member (including backend extras such as `database`) as it is.
  return new Proxy(store, {
    get(target, property, receiver) {
      if (typeof property === "string" && property in overrides) {
        return overrides[property as keyof AuthorizationStore];
      }
      return Reflect.get(target, property, receiver);
    },
  });
}
