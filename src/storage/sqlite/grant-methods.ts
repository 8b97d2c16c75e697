/**
 * The SQLite store's grants and the tokens issued under them (storage contract "Grants", "Refresh
 * tokens", "Access tokens"): listing, revocation, step-up, and refresh rotation, moved out of
 * store.ts so the store reads by concern. The rotation judgement, and what it writes, is every
 * backend's (../rules.ts `judgeRefreshToken`); this module reads the token and its grant and runs
 * the verdict's writes under the group commit's write lock.
 */
import type { AuthorizationStore, RotateRefreshResult } from "../contract.js";
import { grantWithAccessTokenWrites, judgeRefreshToken, type StorageWrite } from "../rules.js";
import {
  type Row,
  rowToAccessToken,
  rowToGrant,
  rowToRefreshToken,
  rowToSupersedeCandidate,
} from "../sql/rows.js";
import { requestStepUpStatement, revokeAccessTokenStatement, type Statement } from "../sql/statements.js";
import { candidateParams, SUPERSEDE_CANDIDATES_SQL } from "./superseded.js";

/** listGrants filter fields and the grants columns they match. */
const GRANT_FILTER_COLUMNS = [
  ["userId", "user_id"],
  ["clientId", "client_id"],
  ["resource", "resource"],
  ["sessionHash", "session_hash"],
] as const;

/** What the methods need from the store: its statement runners, the writer of verdicts, read and write. */
export interface SqliteGrantIo {
  one(text: string, ...params: unknown[]): Row | undefined;
  all(text: string, ...params: unknown[]): Row[];
  run(text: string, ...params: unknown[]): number;
  exec(statement: Statement): number;
  applyWrites(writes: readonly StorageWrite[]): void;
  revokeGrantRows(grantId: string, now: number): boolean;
  read<T>(fn: () => T): Promise<T>;
  write<T>(fn: () => T): Promise<T>;
}

type GrantMethods = Pick<
  AuthorizationStore,
  | "createGrantWithAccessToken"
  | "getGrant"
  | "listGrants"
  | "listSupersedeCandidates"
  | "revokeGrant"
  | "requestStepUp"
  | "rotateRefreshToken"
  | "getRefreshToken"
  | "getAccessToken"
  | "revokeAccessToken"
>;

export function sqliteGrantMethods(io: SqliteGrantIo): GrantMethods {
  const { one, all, exec, applyWrites, revokeGrantRows, read, write } = io;
  return {
    async createGrantWithAccessToken(grant) {
      await write(() => applyWrites(grantWithAccessTokenWrites(grant)));
    },
    async getGrant(grantId) {
      const row = await read(() => one("SELECT * FROM grants WHERE grant_id = ?", grantId));
      return row && rowToGrant(row);
    },
    async listGrants(filter = {}) {
      // Only the conditions the filter sets: a `(? IS NULL OR user_id = ?)` term keeps SQLite from
      // using the user_id and client_id indexes, so every call scanned the whole grants table
      // (which grows by one row per approved flow). One statement text per filter shape, cached.
      // With a user, the user's index is the one to search (a client may have every user's grants):
      // a unary `+` keeps the client_id term from competing for it (SQLite query optimizer overview,
      // "Disqualifying WHERE clause terms using unary-+"). Column names come from the table above.
      const conditions: string[] = [];
      const params: Record<string, string> = {};
      for (const [key, column] of GRANT_FILTER_COLUMNS) {
        const value = filter[key];
        if (value === undefined) continue;
        const term = key === "clientId" && filter.userId !== undefined ? `+${column}` : column;
        conditions.push(`${term} = $${key}`);
        params[key] = value;
      }
      if (filter.active) conditions.push("revoked_at IS NULL");
      const where = conditions.length ? ` WHERE ${conditions.join(" AND ")}` : "";
      const rows = await read(() =>
        all(`SELECT * FROM grants${where} ORDER BY created_at, grant_id`, params),
      );
      return rows.map(rowToGrant);
    },
    async listSupersedeCandidates(key) {
      const rows = await read(() => all(SUPERSEDE_CANDIDATES_SQL, ...candidateParams(key)));
      return rows.map((row) => rowToSupersedeCandidate(row, key));
    },
    async revokeGrant(grantId, now) {
      return write(() => revokeGrantRows(grantId, now));
    },
    async requestStepUp(jti, now) {
      return (await write(() => exec(requestStepUpStatement("?", jti, now)))) > 0;
    },

    async rotateRefreshToken(tokenHash, now, check, tokensOrFn, graceMs = 0): Promise<RotateRefreshResult> {
      return write((): RotateRefreshResult => {
        const row = one("SELECT * FROM refresh_tokens WHERE token_hash = ?", tokenHash);
        if (!row) return { status: "not_found" };
        const token = rowToRefreshToken(row);
        const grantRow = one("SELECT * FROM grants WHERE grant_id = ?", token.grantId);
        if (!grantRow) return { status: "not_found" };
        const grant = rowToGrant(grantRow);
        const { writes, result } = judgeRefreshToken(token, grant, now, graceMs, check, tokensOrFn);
        applyWrites(writes);
        return result;
      });
    },
    async getRefreshToken(tokenHash) {
      const row = await read(() => one("SELECT * FROM refresh_tokens WHERE token_hash = ?", tokenHash));
      return row && rowToRefreshToken(row);
    },
    async getAccessToken(jti) {
      const row = await read(() => one("SELECT * FROM access_tokens WHERE jti = ?", jti));
      return row && rowToAccessToken(row);
    },
    async revokeAccessToken(jti, now, token) {
      return (await write(() => exec(revokeAccessTokenStatement("?", jti, now, token)))) > 0;
    },
  };
}
