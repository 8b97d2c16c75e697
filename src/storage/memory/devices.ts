/**
 * The memory store's device authorizations (RFC 8628; storage contract "Device authorization"),
 * apart from index.ts as upstream.ts holds the upstream state. The maps stay in index.ts, whose
 * end of a user's access and purge also touch them; a poll's verdict (../rules.ts
 * `judgeDevicePoll`) is written through the store's own `applyWrites`, passed in, which checks
 * every insert before it writes anything.
 */
import type {
  AuthorizationStore,
  DeviceAuthorizationRecord,
  PollDeviceAuthorizationResult,
} from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { decideDevice, isExpired, judgeDevicePoll, type StorageWrite } from "../rules.js";
import { copy, detached } from "./copy.js";

type DeviceMethods = Pick<
  AuthorizationStore,
  | "createDeviceAuthorization"
  | "getDeviceAuthorizationByUserCode"
  | "decideDeviceAuthorization"
  | "pollDeviceAuthorization"
>;

/** What the methods need of the store: its device maps and the writer of its verdicts. */
interface DeviceStore {
  devices: Map<string, DeviceAuthorizationRecord>;
  devicesByUserCode: Map<string, string>;
  applyWrites(writes: readonly StorageWrite[]): void;
}

export function createMemoryDeviceMethods(store: DeviceStore): DeviceMethods {
  const { devices, devicesByUserCode, applyWrites } = store;
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
      const { writes, result } = judgeDevicePoll(stored, clientId, now, tokens);
      applyWrites(writes);
      return detached(result);
    },
  };
}
