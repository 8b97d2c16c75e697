/**
 * In-memory {@link AuthorizationStore}: for tests, examples and single-process demos.
 *
 * JavaScript runs one callback at a time, so each operation is atomic as long as it never awaits
 * between reading and writing: every method below does all its work synchronously and only then
 * returns a settled promise. Records are cloned on the way in and out so callers cannot mutate
 * the stored state through a returned object.
 *
 * Nothing persists: a restart loses every grant.
 */

import { grantIdOfAccessTokenId } from "../access-token-id.js";
import type {
  AccessTokenRecord,
  AuthorizationCodeRecord,
  AuthorizationStore,
  ClientRecord,
  CodeRedemptionCheck,
  CodeRedemptionTokens,
  ConsentRecord,
  DeviceAuthorizationRecord,
  GrantRecord,
  InteractionRecord,
  PurgeResult,
  RedeemCodeResult,
  RefreshTokenRecord,
  RotateRefreshResult,
  SessionRecord,
  SignInGrantKey,
  SigningKeyRecord,
  SupersedeCandidate,
  SupersedeDecision,
  UserRecord,
} from "../contract.js";
import { StorageConflictError } from "../contract.js";
import {
  assertMarkerKey,
  compareBy,
  emptyPurgeResult,
  grantWithAccessTokenWrites,
  isEnabledAdmin,
  isExpired,
  judgeAuthorizationCode,
  judgeRefreshToken,
  judgeUserChange,
  markerBlocks,
  type StorageWrite,
  signInGrantKey,
  withoutUndefined,
} from "../rules.js";
import { createMemoryClientMethods } from "./clients.js";
import { copy, detached } from "./copy.js";
import { createMemoryDeviceMethods } from "./devices.js";
import { createGrantIndex } from "./grant-index.js";
import { createMemorySessionMethods } from "./sessions.js";
import { createMemorySigningKeyMethods } from "./signing-keys.js";
import { createMemoryUpstream } from "./upstream.js";

/** Creates an empty in-memory store. `migrate()` and `close()` are no-ops. */
export function createMemoryStore(): AuthorizationStore {
  const clients = new Map<string, ClientRecord>();
  const users = new Map<string, UserRecord>();
  const sessions = new Map<string, SessionRecord>();
  const interactions = new Map<string, InteractionRecord>();
  const consents = new Map<string, ConsentRecord>();
  const codes = new Map<string, AuthorizationCodeRecord>();
  const grants = new Map<string, GrantRecord>();
  const refreshTokens = new Map<string, RefreshTokenRecord>();
  const accessTokens = new Map<string, AccessTokenRecord>();
  const signingKeys = new Map<string, SigningKeyRecord>();
  const rateLimits = new Map<string, { windowStart: number; expiresAt: number; count: number }>();
  const documents = new Map<string, { body: string; expiresAt: number }>();
  /** Single-use markers: key -> expiry. */
  const markers = new Map<string, number>();
  /** Device authorizations by device code hash, and the device code hash of each user code hash. */
  const devices = new Map<string, DeviceAuthorizationRecord>();
  const devicesByUserCode = new Map<string, string>();
  const upstream = createMemoryUpstream(users, grants);
  /** Tokens by grant and active grants by sign-in (./grant-index.ts): told of every such write. */
  const index = createGrantIndex();

  /**
   * Runs the writes of a verdict (../rules.ts {@link StorageWrite}), in order. Nothing here rolls
   * back: every insert is checked first, so a conflict throws before anything is written and
   * leaves no partial state (a code stays unused, a device authorization approved).
   */
  function applyWrites(writes: readonly StorageWrite[]): void {
    for (const write of writes) {
      if (write.op === "insertGrant" && grants.has(write.grant.grantId))
        throw new StorageConflictError("grant already exists");
      if (write.op === "insertRefreshToken" && refreshTokens.has(write.token.tokenHash))
        throw new StorageConflictError("refresh token hash already exists");
    }
    for (const write of writes) applyWrite(write);
  }

  /** One write; the records in it are the verdict's own (built by ../rules.ts), kept as they are. */
  function applyWrite(write: StorageWrite): void {
    switch (write.op) {
      case "revokeGrant":
        revokeGrantNow(write.grantId, write.now);
        return;
      case "markCodeUsed": {
        const code = codes.get(write.codeHash);
        if (code) code.consumedAt = write.now;
        return;
      }
      case "insertCode":
        codes.set(write.code.codeHash, write.code);
        return;
      case "insertGrant":
        grants.set(write.grant.grantId, write.grant);
        index.grantStored(write.grant);
        return;
      case "insertRefreshToken":
        refreshTokens.set(write.token.tokenHash, write.token);
        index.refreshStored(write.token.grantId, write.token.tokenHash);
        return;
      case "markRotated": {
        const token = refreshTokens.get(write.tokenHash);
        if (token) token.rotatedAt = write.rotatedAt;
        return;
      }
      case "markSuccessorUsed": {
        const token = refreshTokens.get(write.tokenHash);
        if (token) token.successorUsedAt ??= write.now;
        return;
      }
      case "updateDevice":
        devices.set(write.record.deviceCodeHash, copy(write.record));
        return;
    }
  }

  /** The active grants of one sign-in, oldest first, with the supersede decision's fields. */
  function supersedeCandidates(key: SignInGrantKey): SupersedeCandidate[] {
    const candidates: SupersedeCandidate[] = [];
    for (const id of index.activeGrantsOf(key)) {
      const g = grants.get(id);
      if (g === undefined || g.revokedAt !== undefined) continue;
      const { grantId, resource, createdAt, dpopJkt, stepUpRequestedAt } = g;
      const scopes = [...g.scopes];
      const sessionHash = key.sessionHash;
      candidates.push(
        withoutUndefined({ grantId, scopes, resource, sessionHash, createdAt, dpopJkt, stepUpRequestedAt }),
      );
    }
    return candidates.sort(compareBy((g) => [g.createdAt, g.grantId]));
  }

  /**
   * Inside a redemption (contract `supersedes`): decided over all the candidates at once before
   * anything is revoked, so a throwing decision retires nothing.
   */
  function retireSuperseded(grant: GrantRecord, supersedes: SupersedeDecision, now: number) {
    const key = signInGrantKey(grant);
    if (key === undefined) return [];
    try {
      const others = supersedeCandidates(key).filter((c) => c.grantId !== grant.grantId);
      const picked = new Set(supersedes(copy(grant), others.map(copy)));
      const retired = others.filter((c) => picked.has(c.grantId)).map((c) => c.grantId);
      for (const id of retired) revokeGrantNow(id, now);
      return retired;
    } catch {
      return undefined;
    }
  }

  /** Revokes the grant and, down the chain, every grant exchanged from it (RFC 7009 §2.1). */
  function revokeGrantNow(grantId: string, now: number): boolean {
    if (!revokeOneGrant(grantId, now)) return false;
    const seen = new Set([grantId]);
    const pending = [...index.exchangedFrom(grantId)];
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      if (seen.has(next)) continue;
      seen.add(next);
      if (revokeOneGrant(next, now)) pending.push(...index.exchangedFrom(next));
    }
    return true;
  }

  function revokeOneGrant(grantId: string, now: number): boolean {
    const grant = grants.get(grantId);
    if (!grant) return false;
    index.grantRevoked(grant);
    grant.revokedAt ??= now;
    for (const hash of index.refreshTokensOf(grantId)) {
      const token = refreshTokens.get(hash);
      if (token) token.revokedAt ??= now;
    }
    for (const jti of index.accessTokensOf(grantId)) {
      const token = accessTokens.get(jti);
      if (token) token.revokedAt ??= now;
    }
    upstream.dropTokenSetsOf(`grant:${grantId}`);
    return true;
  }

  /**
   * One code redemption (contract `redeemAuthorizationCode`): `code` is the stored record, or the
   * record of a sealed code (`unstored`), stored as consumed once the judgement consumes it.
   */
  function redeemCode(
    code: AuthorizationCodeRecord | undefined,
    unstored: AuthorizationCodeRecord | undefined,
    now: number,
    check: CodeRedemptionCheck,
    tokens: CodeRedemptionTokens,
    supersedes: SupersedeDecision | undefined,
  ): RedeemCodeResult {
    if (!code) return { status: "not_found" };
    // `check` and `tokens` see copies, so nothing they do reaches the stored code.
    const { writes, result } = judgeAuthorizationCode(
      code,
      now,
      (c) => check(copy(c)),
      typeof tokens === "function" ? (c) => tokens(copy(c)) : tokens,
      unstored ? "sealed" : "row",
    );
    applyWrites(writes);
    if (result.status !== "issued" || !supersedes) return detached(result);
    const superseded = retireSuperseded(result.grant, supersedes, now);
    return { ...detached(result), ...(superseded && { superseded }) };
  }
  const clientMethods = createMemoryClientMethods(clients);
  const sessionMethods = createMemorySessionMethods(sessions, interactions, consents, upstream);
  const signingKeyMethods = createMemorySigningKeyMethods(signingKeys);
  const deviceMethods = createMemoryDeviceMethods({
    devices,
    devicesByUserCode,
    applyWrites,
  });
  const store: AuthorizationStore = {
    contractVersion: 2,
    async migrate() {},
    async close() {},

    ...clientMethods,

    async createUser(user) {
      if (users.has(user.id)) throw new StorageConflictError("user id already exists");
      for (const other of users.values()) {
        if (other.username === user.username) throw new StorageConflictError("username already exists");
      }
      users.set(user.id, copy(user));
    },
    async getUserByUsername(username) {
      for (const user of users.values()) if (user.username === username) return copy(user);
      return undefined;
    },
    async getUser(id) {
      const user = users.get(id);
      return user && copy(user);
    },
    async listUsers() {
      return [...users.values()].sort(compareBy((u) => [u.createdAt, u.username])).map(copy);
    },
    async setUserPassword(id, passwordHash) {
      const user = users.get(id);
      if (user) user.passwordHash = passwordHash;
    },

    async changeUser(id, change, now) {
      const user = users.get(id);
      if (!user) return { status: "not_found" };
      const admins = [...users.values()].filter(isEnabledAdmin).length;
      const next = judgeUserChange(user, change, admins, now);
      if (next === "last_admin") return { status: "last_admin" };
      if (change === "remove") {
        users.delete(id);
        for (const [key, consent] of consents) if (consent.userId === id) consents.delete(key);
        upstream.dropIdentitiesOfUser(id);
      } else {
        users.set(id, copy(next));
      }
      return { status: "changed", user: copy(next) };
    },
    async endUserAccess(userId, now) {
      let revoked = 0;
      for (const grant of grants.values()) {
        if (grant.userId === userId && grant.revokedAt === undefined && revokeGrantNow(grant.grantId, now))
          revoked++;
      }
      let ended = 0;
      for (const [idHash, session] of sessions) {
        if (session.userId !== userId) continue;
        sessions.delete(idHash);
        ended++;
      }
      upstream.dropTokenSetsOfUser(userId);
      for (const device of devices.values()) {
        if (device.userId === userId && device.status === "approved") device.status = "denied";
      }
      return { grants: revoked, sessions: ended };
    },

    ...sessionMethods,

    async insertAuthorizationCode(code) {
      if (codes.has(code.codeHash)) throw new StorageConflictError("authorization code already exists");
      codes.set(code.codeHash, copy(code));
    },
    async redeemAuthorizationCode(codeHash, now, check, tokens, supersedes): Promise<RedeemCodeResult> {
      return redeemCode(codes.get(codeHash), undefined, now, check, tokens, supersedes);
    },
    async redeemSealedAuthorizationCode(code, now, check, tokens, supersedes): Promise<RedeemCodeResult> {
      const stored = codes.get(code.codeHash);
      if (stored) return redeemCode(stored, undefined, now, check, tokens, supersedes);
      const sealed = copy(code);
      delete sealed.consumedAt;
      return redeemCode(sealed, sealed, now, check, tokens, supersedes);
    },

    async createGrantWithAccessToken(grant) {
      applyWrites(grantWithAccessTokenWrites(copy(grant)));
    },
    async getGrant(grantId) {
      const grant = grants.get(grantId);
      return grant && copy(grant);
    },
    async listGrants(filter = {}) {
      return [...grants.values()]
        .filter((g) => filter.userId === undefined || g.userId === filter.userId)
        .filter((g) => filter.clientId === undefined || g.clientId === filter.clientId)
        .filter((g) => filter.resource === undefined || g.resource === filter.resource)
        .filter((g) => filter.sessionHash === undefined || g.sessionHash === filter.sessionHash)
        .filter((g) => !filter.active || g.revokedAt === undefined)
        .sort(compareBy((g) => [g.createdAt, g.grantId]))
        .map(copy);
    },
    async listSupersedeCandidates(key) {
      return supersedeCandidates(key);
    },
    async revokeGrant(grantId, now) {
      return revokeGrantNow(grantId, now);
    },
    async requestStepUp(jti, now) {
      const grantId = grantIdOfAccessTokenId(jti) ?? accessTokens.get(jti)?.grantId;
      const grant = grantId === undefined ? undefined : grants.get(grantId);
      if (!grant || grant.revokedAt !== undefined) return false;
      grant.stepUpRequestedAt = now;
      return true;
    },

    async rotateRefreshToken(tokenHash, now, check, tokensOrFn, graceMs = 0): Promise<RotateRefreshResult> {
      const token = refreshTokens.get(tokenHash);
      if (!token) return { status: "not_found" };
      const grant = grants.get(token.grantId);
      if (!grant) return { status: "not_found" };
      // OAuth 2.1 §4.3.1 / RFC 9700 §4.14.2: a rotated token presented again means it leaked.
      const { writes, result } = judgeRefreshToken(
        token,
        grant,
        now,
        graceMs,
        (t, g) => check(copy(t), copy(g)),
        tokensOrFn,
      );
      applyWrites(writes);
      return detached(result);
    },
    async getRefreshToken(tokenHash) {
      const token = refreshTokens.get(tokenHash);
      return token && copy(token);
    },
    async getAccessToken(jti) {
      const token = accessTokens.get(jti);
      return token && copy(token);
    },
    async revokeAccessToken(jti, now, revoked) {
      const token = accessTokens.get(jti);
      if (token) {
        token.revokedAt ??= now;
        return true;
      }
      // Contract version 2: no row was written at issuance; the revoked list gets one, unless its
      // grant is gone (its tokens are inactive already), and the purge drops it once it expires.
      if (revoked === undefined || revoked.jti !== jti || !grants.has(revoked.grantId)) return false;
      accessTokens.set(jti, { ...copy(revoked), revokedAt: now });
      index.accessStored(revoked.grantId, jti);
      return true;
    },

    ...signingKeyMethods,

    ...deviceMethods,

    async useOnce(key, expiresAt, now) {
      assertMarkerKey(key);
      const existing = markers.get(key);
      if (existing !== undefined && markerBlocks(existing, now)) return false;
      markers.set(key, expiresAt);
      return true;
    },

    ...upstream.methods,

    async hitRateLimit(key, windowStart, windowMs) {
      const entry = rateLimits.get(key);
      if (!entry || windowStart > entry.windowStart) {
        rateLimits.set(key, { windowStart, expiresAt: windowStart + windowMs, count: 1 });
        return 1;
      }
      // A hit stamped with an older window (clock skew between instances) counts in the current one.
      entry.count++;
      return entry.count;
    },

    async getCachedDocument(url, now) {
      const doc = documents.get(url);
      return doc && !isExpired(doc.expiresAt, now) ? { ...doc } : undefined;
    },
    async putCachedDocument(url, body, expiresAt) {
      documents.set(url, { body, expiresAt });
    },

    async purgeExpired(now): Promise<PurgeResult> {
      const result = emptyPurgeResult();
      const purgeable = new Set<string>();
      const alive = (jti: string) => {
        const token = accessTokens.get(jti);
        return token !== undefined && !isExpired(token.expiresAt, now);
      };
      for (const grant of grants.values()) {
        const liveAccess = [...index.accessTokensOf(grant.grantId)].some(alive);
        if (isExpired(grant.expiresAt, now) || (grant.revokedAt !== undefined && !liveAccess)) {
          purgeable.add(grant.grantId);
        }
      }
      const sweep = <V>(
        map: Map<string, V>,
        dead: (v: V) => boolean,
        dropped?: (v: V, k: string) => void,
      ) => {
        let n = 0;
        for (const [k, v] of map) {
          if (dead(v)) {
            map.delete(k);
            dropped?.(v, k);
            n++;
          }
        }
        return n;
      };
      result.codes = sweep(codes, (c) => isExpired(c.expiresAt, now));
      result.refreshTokens = sweep(
        refreshTokens,
        (t) => isExpired(t.expiresAt, now) || purgeable.has(t.grantId) || !grants.has(t.grantId),
        (t, hash) => index.refreshDropped(t.grantId, hash),
      );
      result.accessTokens = sweep(
        accessTokens,
        (t) => isExpired(t.expiresAt, now) || purgeable.has(t.grantId) || !grants.has(t.grantId),
        (t, jti) => index.accessDropped(t.grantId, jti),
      );
      result.grants = sweep(
        grants,
        (g) => purgeable.has(g.grantId),
        (g) => index.grantDropped(g),
      );
      result.interactions = sweep(interactions, (i) => isExpired(i.expiresAt, now));
      result.sessions = sweep(sessions, (s) => isExpired(s.expiresAt, now));
      result.clients = sweep(clients, (c) => c.expiresAt !== undefined && isExpired(c.expiresAt, now));
      result.markers = sweep(markers, (expiresAt) => isExpired(expiresAt, now));
      result.deviceAuthorizations = sweep(devices, (d) => {
        if (!isExpired(d.expiresAt, now)) return false;
        devicesByUserCode.delete(d.userCodeHash);
        return true;
      });
      sweep(rateLimits, (r) => isExpired(r.expiresAt, now));
      upstream.purgeExpired(now);
      sweep(documents, (d) => isExpired(d.expiresAt, now));
      return result;
    },
  };
  return store;
}
