/**
 * The SQLite store's device authorizations (RFC 8628; storage contract "Device authorization"),
 * moved out of store.ts so the store reads by concern. The verdicts, and what a poll writes, are
 * judged once for every backend (../rules.ts `decideDevice`, `judgeDevicePoll`); this module runs
 * them under the group commit's write lock (BEGIN IMMEDIATE), so a decision and a poll each see
 * one state.
 */
import type { AuthorizationStore, PollDeviceAuthorizationResult } from "../contract.js";
import { decideDevice, judgeDevicePoll, type StorageWrite } from "../rules.js";
import {
  deviceAuthorizationInsert,
  type Row,
  type RowInsert,
  rowToDeviceAuthorization,
} from "../sql/rows.js";
import { type Statement, updateDeviceAuthorizationStatement } from "../sql/statements.js";

/** What the methods need from the store: its statement runners, the writer of verdicts, read and write. */
export interface SqliteDeviceIo {
  one(text: string, ...params: unknown[]): Row | undefined;
  exec(statement: Statement): number;
  insert(row: RowInsert): number;
  applyWrites(writes: readonly StorageWrite[]): void;
  read<T>(fn: () => T): Promise<T>;
  write<T>(fn: () => T): Promise<T>;
}

export type DeviceMethods = Pick<
  AuthorizationStore,
  | "createDeviceAuthorization"
  | "getDeviceAuthorizationByUserCode"
  | "decideDeviceAuthorization"
  | "pollDeviceAuthorization"
>;

export function sqliteDeviceMethods({
  one,
  exec,
  insert,
  applyWrites,
  read,
  write,
}: SqliteDeviceIo): DeviceMethods {
  return {
    async createDeviceAuthorization(record) {
      await write(() => insert(deviceAuthorizationInsert(record)));
    },
    async getDeviceAuthorizationByUserCode(userCodeHash, now) {
      const row = await read(() =>
        one(
          "SELECT * FROM device_authorizations WHERE user_code_hash = ? AND status = 'pending' AND expires_at > ?",
          userCodeHash,
          now,
        ),
      );
      return row && rowToDeviceAuthorization(row);
    },
    async decideDeviceAuthorization(userCodeHash, decision, now) {
      // Read and write under the write lock (BEGIN IMMEDIATE): of two decisions only the first sees
      // the authorization pending.
      return write(() => {
        const row = one("SELECT * FROM device_authorizations WHERE user_code_hash = ?", userCodeHash);
        const decided = row && decideDevice(rowToDeviceAuthorization(row), decision, now);
        if (!decided) return false;
        exec(updateDeviceAuthorizationStatement("?", decided));
        return true;
      });
    },
    async pollDeviceAuthorization(
      deviceCodeHash,
      clientId,
      now,
      tokens,
    ): Promise<PollDeviceAuthorizationResult> {
      return write((): PollDeviceAuthorizationResult => {
        const row = one("SELECT * FROM device_authorizations WHERE device_code_hash = ?", deviceCodeHash);
        if (!row) return { status: "not_found" };
        // A throw from `tokens` (inside the judgement) rolls back this operation's savepoint.
        const { writes, result } = judgeDevicePoll(rowToDeviceAuthorization(row), clientId, now, tokens);
        applyWrites(writes);
        return result;
      });
    },
  };
}
