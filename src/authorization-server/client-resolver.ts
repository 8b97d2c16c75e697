import type { AuthorizationStore } from "../storage/contract.js";
import type { Logger } from "../shared/log.js";
import type { ClientResolver, ResolvedOptions } from "./context.js";

/**
 * Placeholder: registered clients from storage only. The Client ID Metadata Document work replaces
 * this with a resolver that also fetches URL client ids through the guarded fetch.
 */
export interface ClientResolverDeps {
  store: AuthorizationStore;
  options: ResolvedOptions;
  log: Logger;
  now(): number;
}

export function createClientResolver(deps: ClientResolverDeps): ClientResolver {
  return {
    async resolve(clientId) {
      if (/^https:\/\//i.test(clientId)) return undefined;
      return deps.store.getClient(clientId);
    },
  };
}
