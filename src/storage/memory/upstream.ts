/**
 * The memory store's upstream sign-in state and kept upstream tokens (storage contract "Upstream
 * identity providers"), apart from index.ts as the SQLite store keeps them in upstream-methods.ts.
 * The maps live here; the store passes its users and grants, which these methods read and write.
 */
import type {
  GrantRecord,
  UpstreamIdentityRecord,
  UpstreamLoginRecord,
  UpstreamTokenSetRecord,
  UserRecord,
} from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { isExpired } from "../rules.js";
import type { UpstreamStoreMethods } from "../sql/upstream.js";
import { copy } from "./copy.js";

export interface MemoryUpstream {
  methods: UpstreamStoreMethods;
  /** Drops every token set of a holder (`session:<hash>` or `grant:<id>`), when it ends. */
  dropTokenSetsOf(holder: string): void;
  /** Drops every token set of a user, whoever holds it (the user's access ended). */
  dropTokenSetsOfUser(userId: string): void;
  /** Drops a removed user's identity links. */
  dropIdentitiesOfUser(userId: string): void;
  /** Drops expired logins and token sets, and those of grants that are gone. */
  purgeExpired(now: number): void;
}

export function createMemoryUpstream(
  users: Map<string, UserRecord>,
  grants: Map<string, GrantRecord>,
): MemoryUpstream {
  const upstreamLogins = new Map<string, UpstreamLoginRecord>();
  /** Keyed by JSON [providerId, subject]. */
  const upstreamIdentities = new Map<string, UpstreamIdentityRecord>();
  const identityKey = (providerId: string, subject: string) => JSON.stringify([providerId, subject]);
  /** Upstream token sets keyed by JSON [holder, providerId]; holder `session:<hash>` or `grant:<id>`. */
  const upstreamTokenSets = new Map<string, UpstreamTokenSetRecord & { holder: string }>();
  const tokenSetKey = (holder: string, providerId: string) => JSON.stringify([holder, providerId]);

  const methods: UpstreamStoreMethods = {
    async createUpstreamLogin(login) {
      if (upstreamLogins.has(login.stateHash))
        throw new StorageConflictError("upstream login already exists");
      upstreamLogins.set(login.stateHash, copy(login));
    },
    async consumeUpstreamLogin(stateHash, now) {
      const login = upstreamLogins.get(stateHash);
      if (!login) return undefined;
      upstreamLogins.delete(stateHash);
      return isExpired(login.expiresAt, now) ? undefined : copy(login);
    },
    async getUpstreamIdentity(providerId, subject) {
      const identity = upstreamIdentities.get(identityKey(providerId, subject));
      return identity && copy(identity);
    },
    async linkUpstreamIdentity(identity) {
      const key = identityKey(identity.providerId, identity.subject);
      if (upstreamIdentities.has(key)) throw new StorageConflictError("upstream identity already linked");
      upstreamIdentities.set(key, copy(identity));
    },
    async createUserWithUpstreamIdentity(user, identity) {
      const key = identityKey(identity.providerId, identity.subject);
      if (upstreamIdentities.has(key)) throw new StorageConflictError("upstream identity already linked");
      if (users.has(user.id)) throw new StorageConflictError("user id already exists");
      for (const other of users.values()) {
        if (other.username === user.username) throw new StorageConflictError("username already exists");
      }
      users.set(user.id, copy(user));
      upstreamIdentities.set(key, copy({ ...identity, userId: user.id }));
    },
    async recordUpstreamSignIn(update) {
      const identity = upstreamIdentities.get(identityKey(update.providerId, update.subject));
      if (!identity) return;
      delete identity.email;
      delete identity.displayName;
      Object.assign(identity, copy(update));
    },

    async keepSessionUpstreamTokens(sessionHash, set) {
      const holder = `session:${sessionHash}`;
      upstreamTokenSets.set(tokenSetKey(holder, set.providerId), { ...copy(set), holder });
    },
    async bindUpstreamTokens(sessionHash, grantId, now) {
      const grant = grants.get(grantId);
      if (!grant || grant.revokedAt !== undefined || grant.sessionHash !== sessionHash) return 0;
      const holder = `grant:${grantId}`;
      let copied = 0;
      for (const set of [...upstreamTokenSets.values()]) {
        if (set.holder !== `session:${sessionHash}` || set.userId !== grant.userId) continue;
        if (set.expiresAt !== undefined && isExpired(set.expiresAt, now)) continue;
        const key = tokenSetKey(holder, set.providerId);
        if (upstreamTokenSets.has(key)) continue;
        const { expiresAt: _expiry, ...kept } = set;
        upstreamTokenSets.set(key, { ...kept, holder, version: 1, createdAt: now, updatedAt: now });
        copied++;
      }
      return copied;
    },
    async getUpstreamTokens(grantId, providerId) {
      const set = upstreamTokenSets.get(tokenSetKey(`grant:${grantId}`, providerId));
      if (!set) return undefined;
      const { holder: _holder, ...record } = set;
      return copy(record);
    },
    async replaceUpstreamTokens(grantId, providerId, expectedVersion, next) {
      const set = upstreamTokenSets.get(tokenSetKey(`grant:${grantId}`, providerId));
      if (!set || set.version !== expectedVersion) return false;
      Object.assign(set, { sealed: next.sealed, updatedAt: next.updatedAt, version: set.version + 1 });
      return true;
    },
    async deleteUpstreamTokens(grantId, providerId) {
      return upstreamTokenSets.delete(tokenSetKey(`grant:${grantId}`, providerId));
    },
  };

  return {
    methods,
    dropTokenSetsOf(holder) {
      for (const [key, set] of upstreamTokenSets) if (set.holder === holder) upstreamTokenSets.delete(key);
    },
    dropTokenSetsOfUser(userId) {
      for (const [key, set] of upstreamTokenSets) if (set.userId === userId) upstreamTokenSets.delete(key);
    },
    dropIdentitiesOfUser(userId) {
      for (const [key, identity] of upstreamIdentities) {
        if (identity.userId === userId) upstreamIdentities.delete(key);
      }
    },
    purgeExpired(now) {
      for (const [key, login] of upstreamLogins) {
        if (isExpired(login.expiresAt, now)) upstreamLogins.delete(key);
      }
      for (const [key, set] of upstreamTokenSets) {
        const expired = set.expiresAt !== undefined && isExpired(set.expiresAt, now);
        const orphaned = set.holder.startsWith("grant:") && !grants.has(set.holder.slice("grant:".length));
        if (expired || orphaned) upstreamTokenSets.delete(key);
      }
    },
  };
}
