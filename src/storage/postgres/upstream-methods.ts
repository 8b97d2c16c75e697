/**
 * The PostgreSQL store's upstream sign-in state and kept upstream tokens (storage contract
 * "Upstream identity providers"), moved out of store.ts so the store reads by concern. The
 * statements are shared with SQLite (../sql/upstream.ts, ../sql/upstream-tokens.ts).
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
import type { Db, Execute } from "./pool.js";

/** What the methods need from the store: the pool's execute and transaction, a first-row read, a statement runner. */
export interface PostgresUpstreamIo {
  execute: Execute;
  transaction: Db["transaction"];
  first(text: string, params?: unknown[]): Promise<Row | undefined>;
  exec(execute: Execute, statement: Statement): Promise<number>;
}

export function postgresUpstreamMethods({
  execute,
  transaction,
  first,
  exec,
}: PostgresUpstreamIo): UpstreamStoreMethods {
  return {
    async createUpstreamLogin(login) {
      await exec(execute, insertUpstreamLoginStatement("$n", login));
    },
    async consumeUpstreamLogin(stateHash, now) {
      const statement = consumeUpstreamLoginStatement("$n", stateHash);
      const row = await first(statement.text, [...statement.values]);
      return row && Number(row.expires_at) > now ? rowToUpstreamLogin(row) : undefined;
    },
    async getUpstreamIdentity(providerId, subject) {
      const statement = getUpstreamIdentityStatement("$n", providerId, subject);
      const row = await first(statement.text, [...statement.values]);
      return row && rowToUpstreamIdentity(row);
    },
    async linkUpstreamIdentity(identity) {
      await exec(execute, insertUpstreamIdentityStatement("$n", identity, Boolean));
    },
    async createUserWithUpstreamIdentity(user, identity) {
      await transaction(async (tx) => {
        await exec(tx.execute, insertUserStatement("$n", user, Boolean));
        await exec(
          tx.execute,
          insertUpstreamIdentityStatement("$n", { ...identity, userId: user.id }, Boolean),
        );
      });
    },
    async recordUpstreamSignIn(update) {
      await exec(execute, recordUpstreamSignInStatement("$n", update, Boolean));
    },

    async keepSessionUpstreamTokens(sessionHash, set) {
      await exec(execute, keepSessionUpstreamTokensStatement("$n", sessionHash, set));
    },
    async bindUpstreamTokens(sessionHash, grantId, now) {
      return exec(execute, bindUpstreamTokensStatement("$n", sessionHash, grantId, now));
    },
    async getUpstreamTokens(grantId, providerId) {
      const statement = getUpstreamTokensStatement("$n", grantId, providerId);
      const row = await first(statement.text, [...statement.values]);
      return row && rowToUpstreamTokenSet(row);
    },
    async replaceUpstreamTokens(grantId, providerId, expectedVersion, next) {
      const statement = replaceUpstreamTokensStatement("$n", grantId, providerId, expectedVersion, next);
      return (await exec(execute, statement)) > 0;
    },
    async deleteUpstreamTokens(grantId, providerId) {
      return (await exec(execute, deleteUpstreamTokensStatement("$n", grantId, providerId))) > 0;
    },
  };
}
