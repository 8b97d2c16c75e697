/**
 * PostgreSQL {@link AuthorizationStore} on `pg`: the backend for several server instances.
 *
 * Single-use operations are atomic across instances: a code is claimed with
 * `UPDATE ... WHERE consumed_at IS NULL RETURNING`, and every read-then-write runs in one
 * transaction that locks the rows it decides on (`SELECT ... FOR UPDATE`), grant before tokens,
 * so concurrent rotations, replays and revocations queue on the same lock instead of racing.
 */

import type {
  AuthorizationStore,
  PollDeviceAuthorizationResult,
  PurgeResult,
  RedeemCodeResult,
  RotateRefreshResult,
  SupersedeDecision,
} from "../contract.js";
import {
  assertMarkerKey,
  authorizationCodeState,
  decideDevice,
  emptyPurgeResult,
  grantWithAccessTokenWrites,
  judgeDevicePoll,
  judgeRefreshToken,
  mergeScopes,
  sameJsonValue,
} from "../rules.js";
import {
  clientColumns,
  codeInsert,
  deviceAuthorizationInsert,
  fromJson,
  insertSql,
  interactionData,
  rowToAccessToken,
  rowToClient,
  rowToCode,
  rowToConsent,
  rowToDeviceAuthorization,
  rowToGrant,
  rowToInteraction,
  rowToRefreshToken,
  rowToSession,
  rowToSigningKey,
  rowToSupersedeCandidate,
  rowToUser,
  signingKeyInsert,
  toJson,
} from "../sql/rows.js";
import { refuseNewerSchema } from "../sql/schema-version.js";
import {
  purgeStatements,
  requestStepUpStatement,
  revokeAccessTokenStatement,
  updateDeviceAuthorizationStatement,
  useOnceStatement,
} from "../sql/statements.js";
import { deleteSessionUpstreamTokensStatement } from "../sql/upstream-tokens.js";
import { createClientCache } from "./client-cache.js";
import { type Db, openPool, type PostgresStoreOptions } from "./pool.js";
import { POSTGRES_MIGRATIONS } from "./schema.js";
import { candidateParams, retireSuperseded, SUPERSEDE_CANDIDATES_SQL } from "./superseded.js";
import {
  applyWrites,
  exec,
  insert,
  redeemClaimed,
  revokeGrantRows,
  type Tx,
  unclaimedCode,
} from "./transaction-writes.js";
import { postgresUpstreamMethods } from "./upstream-methods.js";
import { postgresUserMethods } from "./user-methods.js";

export type { PostgresStoreOptions } from "./pool.js";

/** A PostgreSQL store; `pool` is exposed for health checks and shutdown ordering. */
export interface PostgresStore extends AuthorizationStore {
  readonly pool: Db["pool"];
  readonly schema: string;
}

/** Opens a pool for a PostgreSQL store. Call `migrate()` before first use. */
export function createPostgresStore(options: PostgresStoreOptions): PostgresStore {
  const db = openPool(options);
  const { query, execute, transaction } = db;
  const first = async (text: string, params?: unknown[]) => (await query(text, params))[0];
  let closed = false;
  // Client records read within the last second (./client-cache.ts: the staleness bound for changes
  // made on other instances); this store's own client writes empty it.
  const clients = createClientCache();
  /**
   * A write of one client: its record is forgotten before and after, so no read that overlapped
   * the write (and may have seen the row before it committed) stays cached.
   */
  async function writingClient<T>(clientId: string, write: () => Promise<T>): Promise<T> {
    clients.forget(clientId);
    try {
      return await write();
    } finally {
      clients.forget(clientId);
    }
  }

  /**
   * An issued redemption retires the grants its new one supersedes in the same transaction
   * (./superseded.ts): one transaction per flow instead of the redemption, a read and a
   * revocation's own transaction after it.
   */
  async function retireInRedemption(
    tx: Tx,
    result: RedeemCodeResult,
    supersedes: SupersedeDecision | undefined,
    now: number,
  ): Promise<RedeemCodeResult> {
    if (result.status !== "issued" || !supersedes) return result;
    const superseded = await retireSuperseded(
      { tx, schema: db.schema, revokeGrantRows },
      result.grant,
      supersedes,
      now,
    );
    return superseded === undefined ? result : { ...result, superseded };
  }

  return {
    pool: db.pool,
    schema: db.schema,
    contractVersion: 2,
    async migrate() {
      await transaction(async (tx) => {
        // Serialises instances starting together; released at COMMIT (or ROLLBACK).
        await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [`gatehouse.migrate:${db.schema}`]);
        await tx.execute(`CREATE SCHEMA IF NOT EXISTS ${db.schema}`);
        await tx.execute(
          "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at bigint NOT NULL)",
        );
        const row = (await tx.query("SELECT coalesce(max(version), 0) AS v FROM schema_migrations"))[0];
        const applied = Number(row?.v ?? 0);
        refuseNewerSchema(applied, POSTGRES_MIGRATIONS);
        for (const migration of POSTGRES_MIGRATIONS) {
          if (migration.version <= applied) continue;
          await tx.execute(migration.sql);
          await tx.execute("INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)", [
            migration.version,
            Date.now(),
          ]);
        }
      });
    },
    async close() {
      if (closed) return;
      closed = true;
      await db.pool.end();
    },

    async createClient(client) {
      const c = clientColumns(client);
      await writingClient(client.clientId, () =>
        execute(
          "INSERT INTO clients (client_id, data, created_at, last_used_at, expires_at) VALUES ($1, $2, $3, $4, $5)",
          [client.clientId, c.data, c.createdAt, c.lastUsedAt, c.expiresAt],
        ),
      );
    },
    async upsertClient(client) {
      const c = clientColumns(client);
      await writingClient(client.clientId, () =>
        execute(
          `INSERT INTO clients (client_id, data, created_at, last_used_at, expires_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (client_id) DO UPDATE SET data = excluded.data, created_at = excluded.created_at,
         last_used_at = excluded.last_used_at, expires_at = excluded.expires_at`,
          [client.clientId, c.data, c.createdAt, c.lastUsedAt, c.expiresAt],
        ),
      );
    },
    async getClient(clientId) {
      return clients.get(clientId, async () => {
        const row = await first("SELECT * FROM clients WHERE client_id = $1", [clientId]);
        return row && rowToClient(row);
      });
    },
    async listClients() {
      return (await query('SELECT * FROM clients ORDER BY created_at, client_id COLLATE "C"')).map(
        rowToClient,
      );
    },
    async deleteClient(clientId) {
      return (
        (await writingClient(clientId, () =>
          execute("DELETE FROM clients WHERE client_id = $1", [clientId]),
        )) > 0
      );
    },
    async markClientUsed(clientId, now) {
      await writingClient(clientId, () =>
        execute("UPDATE clients SET last_used_at = $1, expires_at = NULL WHERE client_id = $2", [
          now,
          clientId,
        ]),
      );
    },

    async createUser(user) {
      await execute(
        "INSERT INTO users (id, username, password_hash, is_admin, created_at) VALUES ($1, $2, $3, $4, $5)",
        [user.id, user.username, user.passwordHash, user.isAdmin, user.createdAt],
      );
    },
    async getUserByUsername(username) {
      const row = await first("SELECT * FROM users WHERE username = $1", [username]);
      return row && rowToUser(row);
    },
    async getUser(id) {
      const row = await first("SELECT * FROM users WHERE id = $1", [id]);
      return row && rowToUser(row);
    },
    async listUsers() {
      return (await query('SELECT * FROM users ORDER BY created_at, username COLLATE "C"')).map(rowToUser);
    },
    async setUserPassword(id, passwordHash) {
      await execute("UPDATE users SET password_hash = $1 WHERE id = $2", [passwordHash, id]);
    },
    ...postgresUserMethods(transaction),

    async createSession(session) {
      await execute(
        "INSERT INTO sessions (id_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)",
        [session.idHash, session.userId, session.createdAt, session.expiresAt],
      );
    },
    async getSession(idHash, now) {
      const row = await first("SELECT * FROM sessions WHERE id_hash = $1 AND expires_at > $2", [idHash, now]);
      return row && rowToSession(row);
    },
    async deleteSession(idHash) {
      await transaction(async (tx) => {
        await tx.execute("DELETE FROM sessions WHERE id_hash = $1", [idHash]);
        await exec(tx.execute, deleteSessionUpstreamTokensStatement("$n", idHash));
      });
    },

    async createInteraction(interaction) {
      await execute("INSERT INTO interactions (id, data, user_id, expires_at) VALUES ($1, $2, $3, $4)", [
        interaction.id,
        interactionData(interaction),
        interaction.userId ?? null,
        interaction.expiresAt,
      ]);
    },
    async getInteraction(id, now) {
      const row = await first("SELECT * FROM interactions WHERE id = $1 AND expires_at > $2", [id, now]);
      return row && rowToInteraction(row);
    },
    async setInteractionUser(id, userId) {
      await execute("UPDATE interactions SET user_id = $1 WHERE id = $2", [userId, id]);
    },
    async consumeInteraction(id, now) {
      // One statement: the row goes to exactly one caller, whichever instance it runs on.
      const row = await first("DELETE FROM interactions WHERE id = $1 RETURNING *", [id]);
      return row && Number(row.expires_at) > now ? rowToInteraction(row) : undefined;
    },

    async getConsent(userId, clientId, redirectUri) {
      const row = await first(
        "SELECT * FROM consents WHERE user_id = $1 AND client_id = $2 AND redirect_uri = $3",
        [userId, clientId, redirectUri],
      );
      return row && rowToConsent(row);
    },
    async grantConsent(consent) {
      const key = [consent.userId, consent.clientId, consent.redirectUri];
      await transaction(async (tx) => {
        // Create the row if absent, then lock it, so concurrent grants merge instead of overwrite.
        await tx.execute(
          `INSERT INTO consents (user_id, client_id, redirect_uri, scopes, created_at, updated_at)
           VALUES ($1, $2, $3, '[]', $4, $5) ON CONFLICT DO NOTHING`,
          [...key, consent.createdAt, consent.updatedAt],
        );
        const row = (
          await tx.query(
            "SELECT scopes FROM consents WHERE user_id = $1 AND client_id = $2 AND redirect_uri = $3 FOR UPDATE",
            key,
          )
        )[0];
        const scopes = mergeScopes(fromJson<string[]>(row?.scopes ?? []), consent.scopes);
        await tx.execute(
          "UPDATE consents SET scopes = $4, updated_at = $5 WHERE user_id = $1 AND client_id = $2 AND redirect_uri = $3",
          [...key, toJson(scopes), consent.updatedAt],
        );
      });
    },
    async revokeConsent(userId, clientId, redirectUri) {
      return redirectUri === undefined
        ? execute("DELETE FROM consents WHERE user_id = $1 AND client_id = $2", [userId, clientId])
        : execute("DELETE FROM consents WHERE user_id = $1 AND client_id = $2 AND redirect_uri = $3", [
            userId,
            clientId,
            redirectUri,
          ]);
    },
    async listConsents(userId) {
      const rows = await query(
        `SELECT * FROM consents WHERE ($1::text IS NULL OR user_id = $1)
         ORDER BY created_at, user_id COLLATE "C", client_id COLLATE "C", redirect_uri COLLATE "C"`,
        [userId ?? null],
      );
      return rows.map(rowToConsent);
    },

    async insertAuthorizationCode(code) {
      await insert(execute, codeInsert(code));
    },
    async redeemAuthorizationCode(codeHash, now, check, tokens, supersedes): Promise<RedeemCodeResult> {
      return transaction(async (tx): Promise<RedeemCodeResult> => {
        // Claim the code: of concurrent callers exactly one gets the row back; the others wait on
        // its row lock and then find it consumed.
        const [claimed] = await tx.query(
          `UPDATE authorization_codes SET consumed_at = $2
           WHERE code_hash = $1 AND consumed_at IS NULL AND expires_at > $2 RETURNING *`,
          [codeHash, now],
        );
        if (!claimed) return unclaimedCode(tx, codeHash, now, "not_found");
        const { consumedAt: _consumedAt, ...unconsumed } = rowToCode(claimed);
        return retireInRedemption(
          tx,
          await redeemClaimed(tx, unconsumed, now, check, tokens),
          supersedes,
          now,
        );
      });
    },
    async redeemSealedAuthorizationCode(code, now, check, tokens, supersedes): Promise<RedeemCodeResult> {
      const { consumedAt: _consumedAt, ...sealed } = code;
      return transaction(async (tx): Promise<RedeemCodeResult> => {
        // An expired sealed code is never written; a row of it means an earlier redemption.
        if (authorizationCodeState(sealed, now) !== "live") {
          return unclaimedCode(tx, sealed.codeHash, now, "expired");
        }
        // Claim it by inserting it, consumed: of concurrent callers exactly one inserts; the others
        // wait for that row's transaction and then find it consumed (a replay).
        const inserted = codeInsert({ ...sealed, consumedAt: now });
        const claimed = await tx.execute(
          `${insertSql(inserted, (n) => `$${n}`)} ON CONFLICT (code_hash) DO NOTHING`,
          inserted.values,
        );
        if (claimed === 0) return unclaimedCode(tx, sealed.codeHash, now, "expired");
        return retireInRedemption(tx, await redeemClaimed(tx, sealed, now, check, tokens), supersedes, now);
      });
    },

    async createGrantWithAccessToken(grant) {
      await transaction((tx) => applyWrites(tx, grantWithAccessTokenWrites(grant)));
    },
    async getGrant(grantId) {
      const row = await first("SELECT * FROM grants WHERE grant_id = $1", [grantId]);
      return row && rowToGrant(row);
    },
    async listGrants(filter = {}) {
      const rows = await query(
        `SELECT * FROM grants WHERE ($1::text IS NULL OR user_id = $1) AND ($2::text IS NULL OR client_id = $2)
         AND ($3::text IS NULL OR resource = $3) AND ($4::text IS NULL OR session_hash = $4)
         AND (NOT $5::boolean OR revoked_at IS NULL)
         ORDER BY created_at, grant_id COLLATE "C"`,
        [
          filter.userId ?? null,
          filter.clientId ?? null,
          filter.resource ?? null,
          filter.sessionHash ?? null,
          filter.active === true,
        ],
      );
      return rows.map(rowToGrant);
    },
    async listSupersedeCandidates(key) {
      // Only the columns the supersede decision reads; same order as listGrants.
      const rows = await query(SUPERSEDE_CANDIDATES_SQL, candidateParams(key));
      return rows.map((row) => rowToSupersedeCandidate(row, key));
    },
    async revokeGrant(grantId, now) {
      return transaction((tx) => revokeGrantRows(tx, grantId, now));
    },
    async requestStepUp(jti, now) {
      // One statement: a concurrent revokeGrant holds the grant row, and `revoked_at IS NULL` is
      // re-checked once it commits, so a revoked grant is never marked.
      return (await exec(execute, requestStepUpStatement("$n", jti, now))) > 0;
    },

    async rotateRefreshToken(tokenHash, now, check, tokensOrFn, graceMs = 0): Promise<RotateRefreshResult> {
      return transaction(async (tx): Promise<RotateRefreshResult> => {
        // Lock order everywhere: grant, then its tokens. The token's grant is found without a lock
        // in the same statement (one round trip less than reading it first).
        const grantRow = (
          await tx.query(
            "SELECT * FROM grants WHERE grant_id = (SELECT grant_id FROM refresh_tokens WHERE token_hash = $1) FOR UPDATE",
            [tokenHash],
          )
        )[0];
        if (!grantRow) return { status: "not_found" };
        const row = (
          await tx.query("SELECT * FROM refresh_tokens WHERE token_hash = $1 FOR UPDATE", [tokenHash])
        )[0];
        if (!row) return { status: "not_found" };
        const grant = rowToGrant(grantRow);
        const token = rowToRefreshToken(row);
        // The writes touch the grant locked above and its tokens only (lock order kept).
        const { writes, result } = judgeRefreshToken(token, grant, now, graceMs, check, tokensOrFn);
        await applyWrites(tx, writes);
        return result;
      });
    },
    async getRefreshToken(tokenHash) {
      const row = await first("SELECT * FROM refresh_tokens WHERE token_hash = $1", [tokenHash]);
      return row && rowToRefreshToken(row);
    },
    async getAccessToken(jti) {
      const row = await first("SELECT * FROM access_tokens WHERE jti = $1", [jti]);
      return row && rowToAccessToken(row);
    },
    async revokeAccessToken(jti, now, token) {
      return (await exec(execute, revokeAccessTokenStatement("$n", jti, now, token))) > 0;
    },

    async listSigningKeys() {
      return (await query('SELECT * FROM signing_keys ORDER BY created_at, kid COLLATE "C"')).map(
        rowToSigningKey,
      );
    },
    async addSigningKey(key, retireOthersAt) {
      await transaction(async (tx) => {
        if (retireOthersAt) {
          await tx.execute(
            "UPDATE signing_keys SET retired_at = $1, expires_at = $2 WHERE retired_at IS NULL",
            [retireOthersAt.retiredAt, retireOthersAt.expiresAt],
          );
        }
        await insert(tx.execute, signingKeyInsert(key));
      });
    },
    async replaceSigningKeyPrivateJwk(kid, expected, next) {
      // The row lock holds from the comparison to COMMIT, so a concurrent swap waits and then sees
      // the new value. Compared in JavaScript, by the same rule as the other backends.
      return transaction(async (tx) => {
        const [row] = await tx.query("SELECT private_jwk FROM signing_keys WHERE kid = $1 FOR UPDATE", [kid]);
        if (!row || !sameJsonValue(fromJson(row.private_jwk), expected)) return false;
        const changed = await tx.execute("UPDATE signing_keys SET private_jwk = $1 WHERE kid = $2", [
          toJson(next),
          kid,
        ]);
        return changed === 1;
      });
    },

    async createDeviceAuthorization(record) {
      await insert(execute, deviceAuthorizationInsert(record));
    },
    async getDeviceAuthorizationByUserCode(userCodeHash, now) {
      const row = await first(
        "SELECT * FROM device_authorizations WHERE user_code_hash = $1 AND status = 'pending' AND expires_at > $2",
        [userCodeHash, now],
      );
      return row && rowToDeviceAuthorization(row);
    },
    async decideDeviceAuthorization(userCodeHash, decision, now) {
      // The row lock holds from the judgement to COMMIT: a concurrent decision waits, then finds
      // the authorization no longer pending.
      return transaction(async (tx) => {
        const [row] = await tx.query(
          "SELECT * FROM device_authorizations WHERE user_code_hash = $1 FOR UPDATE",
          [userCodeHash],
        );
        const decided = row && decideDevice(rowToDeviceAuthorization(row), decision, now);
        if (!decided) return false;
        await exec(tx.execute, updateDeviceAuthorizationStatement("$n", decided));
        return true;
      });
    },
    async pollDeviceAuthorization(
      deviceCodeHash,
      clientId,
      now,
      tokens,
    ): Promise<PollDeviceAuthorizationResult> {
      return transaction(async (tx): Promise<PollDeviceAuthorizationResult> => {
        // Concurrent polls of one device code queue on this row lock: one issues, the others then
        // read it consumed. The new grant is locked after it (nothing else locks a grant first).
        const [row] = await tx.query(
          "SELECT * FROM device_authorizations WHERE device_code_hash = $1 FOR UPDATE",
          [deviceCodeHash],
        );
        if (!row) return { status: "not_found" };
        // A throw from `tokens` (inside the judgement) aborts the transaction: nothing changes.
        const { writes, result } = judgeDevicePoll(rowToDeviceAuthorization(row), clientId, now, tokens);
        await applyWrites(tx, writes);
        return result;
      });
    },

    async useOnce(key, expiresAt, now) {
      assertMarkerKey(key);
      // One statement, atomic across instances (a concurrent insert of the same key waits for the
      // first to commit, then takes the conflict path). Run again after a dropped connection it
      // fails closed: the first run's marker makes it a replay.
      return (await exec(execute, useOnceStatement("$n", key, expiresAt, now))) === 1;
    },

    async hitRateLimit(key, windowStart, windowMs) {
      // A newer window restarts the count; a hit stamped with an older window (clock skew between
      // instances) counts in the current one.
      const row = await first(
        `INSERT INTO rate_limits AS r (key, window_start, expires_at, count) VALUES ($1, $2, $3, 1)
         ON CONFLICT (key) DO UPDATE SET
           count = CASE WHEN excluded.window_start > r.window_start THEN 1 ELSE r.count + 1 END,
           expires_at = CASE WHEN excluded.window_start > r.window_start THEN excluded.expires_at ELSE r.expires_at END,
           window_start = greatest(r.window_start, excluded.window_start)
         RETURNING count`,
        [key, windowStart, windowStart + windowMs],
      );
      return Number(row?.count);
    },

    ...postgresUpstreamMethods({ execute, transaction, first, exec }),

    async getCachedDocument(url, now) {
      const row = await first(
        "SELECT body, expires_at FROM cached_documents WHERE url = $1 AND expires_at > $2",
        [url, now],
      );
      return row && { body: String(row.body), expiresAt: Number(row.expires_at) };
    },
    async putCachedDocument(url, body, expiresAt) {
      await execute(
        `INSERT INTO cached_documents (url, body, expires_at) VALUES ($1, $2, $3)
         ON CONFLICT (url) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at`,
        [url, body, expiresAt],
      );
    },

    async purgeExpired(now): Promise<PurgeResult> {
      clients.clear();
      try {
        return await transaction(async (tx): Promise<PurgeResult> => {
          const result = emptyPurgeResult();
          for (const { statement, counts } of purgeStatements("$n", now)) {
            const changed = await exec(tx.execute, statement);
            if (counts) result[counts] = changed;
          }
          return result;
        });
      } finally {
        // Expired clients were deleted: no read that overlapped the purge stays cached.
        clients.clear();
      }
    },
  };
}
