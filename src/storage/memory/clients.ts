/**
 * The memory store's registered clients (storage contract "Clients"), apart from index.ts as
 * upstream.ts holds the upstream state: the store passes its clients map, which these methods
 * read and write (the purge in index.ts sweeps it too).
 */
import type { AuthorizationStore, ClientRecord } from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { compareBy } from "../rules.js";
import { copy } from "./copy.js";

type ClientMethods = Pick<
  AuthorizationStore,
  "createClient" | "upsertClient" | "getClient" | "listClients" | "deleteClient" | "markClientUsed"
>;

export function createMemoryClientMethods(clients: Map<string, ClientRecord>): ClientMethods {
  return {
    async createClient(client) {
      if (clients.has(client.clientId)) throw new StorageConflictError("client already exists");
      clients.set(client.clientId, copy(client));
    },
    async upsertClient(client) {
      clients.set(client.clientId, copy(client));
    },
    async getClient(clientId) {
      const client = clients.get(clientId);
      return client && copy(client);
    },
    async listClients() {
      return [...clients.values()].sort(compareBy((c) => [c.createdAt, c.clientId])).map(copy);
    },
    async deleteClient(clientId) {
      return clients.delete(clientId);
    },
    async markClientUsed(clientId, now) {
      const client = clients.get(clientId);
      if (!client) return;
      client.lastUsedAt = now;
      delete client.expiresAt;
    },
  };
}
