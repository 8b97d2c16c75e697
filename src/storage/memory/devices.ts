/**
 * The memory store's device authorizations (RFC 8628; storage contract "Device authorization"),
 * apart from index.ts as upstream.ts holds the upstream state. The maps stay in index.ts, whose
 * end of a user's access and purge also touch them; an approved poll writes its grant and tokens
 * through the store's own helpers, passed in, so the checks before any write stay the same.
 */
import type {
  AuthorizationStore,
  DeviceAuthorizationRecord,
  GrantRecord,
  IssuedTokens,
  PollDeviceAuthorizationResult,
} from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { decideDevice, devicePollIssued, isExpired, judgeDevicePoll } from "../rules.js";
import { copy } from "./copy.js";
import type { GrantIndex } from "./grant-index.js";

type DeviceMethods = Pick<
  AuthorizationStore,
  | "createDeviceAuthorization"
  | "getDeviceAuthorizationByUserCode"
  | "decideDeviceAuthorization"
  | "pollDeviceAuthorization"
>;

/** What a poll that issues needs of the store: its grants, their index and its token writes. */
interface DeviceStore {
  devices: Map<string, DeviceAuthorizationRecord>;
  devicesByUserCode: Map<string, string>;
  grants: Map<string, GrantRecord>;
  index: GrantIndex;
  assertTokensFree(tokens: Omit<IssuedTokens, "grantExpiresAt">): void;
  writeTokens(
    grant: GrantRecord,
    clientId: string,
    scopes: string[],
    tokens: Omit<IssuedTokens, "grantExpiresAt">,
    writeRefresh: boolean,
  ): boolean;
}

export function createMemoryDeviceMethods(store: DeviceStore): DeviceMethods {
  const { devices, devicesByUserCode, grants, index, assertTokensFree, writeTokens } = store;
  return {
    async createDeviceAuthorization(record) {
      if (devices.has(record.deviceCodeHash)) throw new StorageConflictError("device code already exists");
      if (devicesByUserCode.has(record.userCodeHash))
        throw new StorageConflictError("user code already exists");
      devices.set(record.deviceCodeHash, copy(record));
      devicesByUserCode.set(record.userCodeHash, record.deviceCodeHash);
    },
    async getDeviceAuthorizationByUserCode(userCodeHash, now) {
      const deviceCodeHash = devicesByUserCode.get(userCodeHash);
      const record = deviceCodeHash === undefined ? undefined : devices.get(deviceCodeHash);
      if (record?.status !== "pending" || isExpired(record.expiresAt, now)) return undefined;
      return copy(record);
    },
    async decideDeviceAuthorization(userCodeHash, decision, now) {
      const deviceCodeHash = devicesByUserCode.get(userCodeHash);
      const record = deviceCodeHash === undefined ? undefined : devices.get(deviceCodeHash);
      const decided = record && decideDevice(record, copy(decision), now);
      if (!decided) return false;
      devices.set(decided.deviceCodeHash, copy(decided));
      return true;
    },
    async pollDeviceAuthorization(
      deviceCodeHash,
      clientId,
      now,
      tokens,
    ): Promise<PollDeviceAuthorizationResult> {
      const stored = devices.get(deviceCodeHash);
      if (!stored) return { status: "not_found" };
      const verdict = judgeDevicePoll(stored, clientId, now, tokens);
      switch (verdict.status) {
        case "not_found":
        case "expired":
        case "denied":
        case "consumed":
          return { status: verdict.status };
        case "pending":
        case "slow_down":
          devices.set(deviceCodeHash, copy(verdict.record));
          return { status: verdict.status };
        case "refused":
          devices.set(deviceCodeHash, copy(verdict.record));
          return { status: "refused", error: verdict.error };
      }
      const { record, grant, tokens: issued } = verdict;
      // As for codes: check every write first, so a conflict leaves the authorization approved.
      if (grants.has(grant.grantId)) throw new StorageConflictError("grant already exists");
      assertTokensFree(issued);
      devices.set(deviceCodeHash, copy(record));
      const storedGrant = copy(grant);
      grants.set(storedGrant.grantId, storedGrant);
      index.grantStored(storedGrant);
      const refreshIssued = writeTokens(
        grant,
        grant.clientId,
        grant.scopes,
        issued,
        record.refreshAllowed === true,
      );
      return devicePollIssued(copy(record), copy(grant), refreshIssued);
    },
  };
}
