/**
 * The SQLite store's upstream sign-in state and kept upstream tokens (storage contract
 * "Upstream identity providers"), moved out of store.ts so the store reads by concern. The
 * statements are shared with PostgreSQL (../sql/upstream.ts, ../sql/upstream-tokens.ts); this
 * module only runs them through the store's read and group-commit write.
 */
import type { Row } from "../sql/rows.js";
import type { Statement } from "../sql/statements.js";
import {
  consumeUpstreamLoginStatement,
  getUpstreamIdentityStatement,
  insertUpstreamIdentityStatement,
  insertUpstreamLoginStatement,
  insertUserStatement,
  recordUpstreamSignInStatement,
  rowToUpstreamIdentity,
  rowToUpstreamLogin,
  type UpstreamStoreMethods,
} from "../sql/upstream.js";
import {
  bindUpstreamTokensStatement,
  deleteUpstreamTokensStatement,
  getUpstreamTokensStatement,
  keepSessionUpstreamTokensStatement,
  replaceUpstreamTokensStatement,
  rowToUpstreamTokenSet,
} from "../sql/upstream-tokens.js";

/** What the methods need from the store: its statement runners, read and write, value mapping. */
export interface SqliteStoreIo {
  one(text: string, ...params: unknown[]): Row | undefined;
  exec(statement: Statement): number;
  read<T>(fn: () => T): Promise<T>;
  write<T>(fn: () => T): Promise<T>;
  sqliteValue(value: unknown): unknown;
}

export function sqliteUpstreamMethods({
  one,
  exec,
  read,
  write,
  sqliteValue,
}: SqliteStoreIo): UpstreamStoreMethods {
  return {
    async createUpstreamLogin(login) {
      await write(() => exec(insertUpstreamLoginStatement("?", login)));
    },
    async consumeUpstreamLogin(stateHash, now) {
      const statement = consumeUpstreamLoginStatement("?", stateHash);
      const row = await write(() => one(statement.text, ...statement.values));
      return row && Number(row.expires_at) > now ? rowToUpstreamLogin(row) : undefined;
    },
    async getUpstreamIdentity(providerId, subject) {
      const statement = getUpstreamIdentityStatement("?", providerId, subject);
      const row = await read(() => one(statement.text, ...statement.values));
      return row && rowToUpstreamIdentity(row);
    },
    async linkUpstreamIdentity(identity) {
      await write(() => exec(insertUpstreamIdentityStatement("?", identity, sqliteValue)));
    },
    async createUserWithUpstreamIdentity(user, identity) {
      // One savepoint of the group commit: a conflict in either insert undoes both.
      await write(() => {
        exec(insertUserStatement("?", user, sqliteValue));
        exec(insertUpstreamIdentityStatement("?", { ...identity, userId: user.id }, sqliteValue));
      });
    },
    async recordUpstreamSignIn(update) {
      await write(() => exec(recordUpstreamSignInStatement("?", update, sqliteValue)));
    },

    async keepSessionUpstreamTokens(sessionHash, set) {
      await write(() => exec(keepSessionUpstreamTokensStatement("?", sessionHash, set)));
    },
    async bindUpstreamTokens(sessionHash, grantId, now) {
      return write(() => exec(bindUpstreamTokensStatement("?", sessionHash, grantId, now)));
    },
    async getUpstreamTokens(grantId, providerId) {
      const statement = getUpstreamTokensStatement("?", grantId, providerId);
      const row = await read(() => one(statement.text, ...statement.values));
      return row && rowToUpstreamTokenSet(row);
    },
    async replaceUpstreamTokens(grantId, providerId, expectedVersion, next) {
      const statement = replaceUpstreamTokensStatement("?", grantId, providerId, expectedVersion, next);
      return (await write(() => exec(statement))) > 0;
    },
    async deleteUpstreamTokens(grantId, providerId) {
      return (await write(() => exec(deleteUpstreamTokensStatement("?", grantId, providerId)))) > 0;
    },
  };
}
