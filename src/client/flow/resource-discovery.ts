/**
 * Authorization flow steps 1-2: which authorization server a resource uses (RFC 9728 protected
 * resource metadata, or the 2025-03-26 fallback), with the results cached in the store.
 * Internal to the client.
 */

import { AuthorizationFlowError } from "../errors.js";
import { discoverProtectedResource, legacyAuthorizationServerVia } from "../protocol/discovery.js";
import type { BearerChallenge } from "../protocol/step-up.js";
import type { StoredResource, StoredServer } from "../stores/types.js";
import { type AuthState, bindingFor, serverRecord } from "./state.js";

/**
 * The resource's metadata and its chosen authorization server's (with how that was discovered),
 * from the store unless `fresh`.
 */
export async function discoverForResource(
  state: AuthState,
  serverUrl: string,
  challenge: BearerChallenge,
  fresh: boolean,
): Promise<{ resource: StoredResource; server: StoredServer }> {
  // Warm path: metadata cached for this resource and the challenge points at the same document.
  if (!fresh) {
    const binding = await bindingFor(state, serverUrl);
    if (binding && (!challenge.resourceMetadata || challenge.resourceMetadata === binding.resource.url)) {
      const server = await state.store.get("server", binding.resource.issuer);
      if (server) return { resource: binding.resource, server };
    }
  }
  let discovered: { metadata: StoredResource["metadata"]; url: string } | undefined;
  try {
    discovered = await discoverProtectedResource({
      serverUrl,
      resourceMetadataUrl: challenge.resourceMetadata,
      fetch: state.fetch,
    });
  } catch (error) {
    if (
      !(
        state.options.legacyFallback &&
        error instanceof AuthorizationFlowError &&
        error.code === "prm_not_found"
      )
    ) {
      throw error;
    }
  }
  if (!discovered) {
    // 2025-03-26 fallback: no PRM; the server's origin is the authorization server.
    const { metadata, discoveredVia } = await legacyAuthorizationServerVia({ serverUrl, fetch: state.fetch });
    const url = new URL(serverUrl);
    const resource: StoredResource = {
      metadata: {
        resource: `${url.origin}${url.pathname}`.replace(/\/+$/, ""),
        authorization_servers: [metadata.issuer],
      },
      url: "",
      issuer: metadata.issuer,
      fetched_at: Date.now(),
    };
    const server: StoredServer = { metadata, discovered_via: discoveredVia, fetched_at: Date.now() };
    await state.store.set("server", metadata.issuer, server);
    await state.store.set("resource", resource.metadata.resource, resource);
    return { resource, server };
  }
  const servers = discovered.metadata.authorization_servers;
  const chosen = await chooseServer(state, servers);
  const server = await serverRecord(state, chosen, fresh);
  // The issuer the server itself uses: the chosen one, or its alias or tenant's issuer under the
  // operator's compatibility settings (issuer-compat.ts), which its tokens are stored under.
  const issuer = server.metadata.issuer;
  const previous = await state.store.get("resource", discovered.metadata.resource);
  if (previous && previous.issuer !== issuer) {
    // The resource moved to another authorization server: tokens from the old one are useless
    // there (spec "Access token usage" 3), and its client registration stays with it.
    for (const [key, tokens] of await state.store.list("tokens")) {
      if (tokens.resource === discovered.metadata.resource && tokens.issuer !== issuer) {
        await state.store.delete("tokens", key);
      }
    }
  }
  const resource: StoredResource = {
    metadata: discovered.metadata,
    url: discovered.url,
    issuer,
    fetched_at: Date.now(),
  };
  await state.store.set("resource", resource.metadata.resource, resource);
  state.options.onEvent?.({ type: "discovered", resource: resource.metadata.resource, issuer });
  return { resource, server };
}

async function chooseServer(state: AuthState, servers: readonly string[]): Promise<string> {
  const chosen = state.options.chooseAuthorizationServer
    ? await state.options.chooseAuthorizationServer(servers)
    : (servers.find((s) => state.options.preregisteredClients?.[s]) ?? servers[0]);
  if (chosen === undefined || !servers.includes(chosen)) {
    throw new AuthorizationFlowError(
      "invalid_document",
      "the chosen authorization server is not one the resource lists",
      { kind: "refused", step: "authorization server selection (RFC 9728 §7.6)" },
    );
  }
  return chosen;
}
