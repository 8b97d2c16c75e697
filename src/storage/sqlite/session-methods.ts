/**
 * The SQLite store's browser sign-in state (storage contract "Sessions", "Interactions",
 * "Consents"): sessions, pending interactions and remembered consents, moved out of store.ts so the
 * store reads by concern. Each runs the same statements through the store's read and group-commit
 * write.
 */
import type { AuthorizationStore } from "../contract.js";
import { mergeScopes } from "../rules.js";
import {
  fromJson,
  interactionData,
  type Row,
  rowToConsent,
  rowToInteraction,
  rowToSession,
  toJson,
} from "../sql/rows.js";
import type { Statement } from "../sql/statements.js";
import { deleteSessionUpstreamTokensStatement } from "../sql/upstream-tokens.js";

/** What the methods need from the store: its statement runners, read and write. */
export interface SqliteSessionIo {
  one(text: string, ...params: unknown[]): Row | undefined;
  all(text: string, ...params: unknown[]): Row[];
  run(text: string, ...params: unknown[]): number;
  exec(statement: Statement): number;
  read<T>(fn: () => T): Promise<T>;
  write<T>(fn: () => T): Promise<T>;
}

type SessionMethods = Pick<
  AuthorizationStore,
  | "createSession"
  | "getSession"
  | "deleteSession"
  | "createInteraction"
  | "getInteraction"
  | "setInteractionUser"
  | "consumeInteraction"
  | "getConsent"
  | "grantConsent"
  | "revokeConsent"
  | "listConsents"
>;

export function sqliteSessionMethods(io: SqliteSessionIo): SessionMethods {
  const { one, all, run, exec, read, write } = io;
  return {
    async createSession(session) {
      await write(() =>
        run(
          "INSERT INTO sessions (id_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
          session.idHash,
          session.userId,
          session.createdAt,
          session.expiresAt,
        ),
      );
    },
    async getSession(idHash, now) {
      const row = await read(() =>
        one("SELECT * FROM sessions WHERE id_hash = ? AND expires_at > ?", idHash, now),
      );
      return row && rowToSession(row);
    },
    async deleteSession(idHash) {
      await write(() => {
        run("DELETE FROM sessions WHERE id_hash = ?", idHash);
        exec(deleteSessionUpstreamTokensStatement("?", idHash));
      });
    },

    async createInteraction(interaction) {
      await write(() =>
        run(
          "INSERT INTO interactions (id, data, user_id, expires_at) VALUES (?, ?, ?, ?)",
          interaction.id,
          interactionData(interaction),
          interaction.userId ?? null,
          interaction.expiresAt,
        ),
      );
    },
    async getInteraction(id, now) {
      const row = await read(() =>
        one("SELECT * FROM interactions WHERE id = ? AND expires_at > ?", id, now),
      );
      return row && rowToInteraction(row);
    },
    async setInteractionUser(id, userId) {
      await write(() => run("UPDATE interactions SET user_id = ? WHERE id = ?", userId, id));
    },
    async consumeInteraction(id, now) {
      // One statement: the row is returned to exactly one caller.
      const row = await write(() => one("DELETE FROM interactions WHERE id = ? RETURNING *", id));
      return row && Number(row.expires_at) > now ? rowToInteraction(row) : undefined;
    },

    async getConsent(userId, clientId, redirectUri) {
      const row = await read(() =>
        one(
          "SELECT * FROM consents WHERE user_id = ? AND client_id = ? AND redirect_uri = ?",
          userId,
          clientId,
          redirectUri,
        ),
      );
      return row && rowToConsent(row);
    },
    async grantConsent(consent) {
      await write(() => {
        const row = one(
          "SELECT scopes FROM consents WHERE user_id = ? AND client_id = ? AND redirect_uri = ?",
          consent.userId,
          consent.clientId,
          consent.redirectUri,
        );
        if (row) {
          const scopes = mergeScopes(fromJson<string[]>(row.scopes), consent.scopes);
          run(
            "UPDATE consents SET scopes = ?, updated_at = ? WHERE user_id = ? AND client_id = ? AND redirect_uri = ?",
            toJson(scopes),
            consent.updatedAt,
            consent.userId,
            consent.clientId,
            consent.redirectUri,
          );
        } else {
          run(
            `INSERT INTO consents (user_id, client_id, redirect_uri, scopes, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?)`,
            consent.userId,
            consent.clientId,
            consent.redirectUri,
            toJson(mergeScopes([], consent.scopes)),
            consent.createdAt,
            consent.updatedAt,
          );
        }
      });
    },
    async revokeConsent(userId, clientId, redirectUri) {
      return write(() =>
        redirectUri === undefined
          ? run("DELETE FROM consents WHERE user_id = ? AND client_id = ?", userId, clientId)
          : run(
              "DELETE FROM consents WHERE user_id = ? AND client_id = ? AND redirect_uri = ?",
              userId,
              clientId,
              redirectUri,
            ),
      );
    },
    async listConsents(userId) {
      const order = "ORDER BY created_at, user_id, client_id, redirect_uri";
      const rows = await read(() =>
        userId === undefined
          ? all(`SELECT * FROM consents ${order}`)
          : all(`SELECT * FROM consents WHERE user_id = ? ${order}`, userId),
      );
      return rows.map(rowToConsent);
    },
  };
}
