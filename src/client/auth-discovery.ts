/**
 * Authorization flow steps 1-2: which authorization server a resource uses (RFC 9728 protected
 * resource metadata, or the 2025-03-26 fallback), with the results cached in the store.
 * Internal to the client.
 */
import type { AuthorizationServerMetadata } from "../shared/metadata.js";
import { type AuthState, bindingFor, serverMetadata } from "./auth-state.js";
import { discoverProtectedResource, legacyAuthorizationServer } from "./discovery.js";
import { AuthorizationFlowError } from "./errors.js";
import type { BearerChallenge } from "./step-up.js";
import type { StoredResource } from "./stores/types.js";

/** The resource's metadata and its chosen authorization server's, from the store unless `fresh`. */
export async function discoverForResource(
  state: AuthState,
  serverUrl: string,
  challenge: BearerChallenge,
  fresh: boolean,
): Promise<{ resource: StoredResource; metadata: AuthorizationServerMetadata }> {
  // Warm path: metadata cached for this resource and the challenge points at the same document.
  if (!fresh) {
    const binding = await bindingFor(state, serverUrl);
    if (binding && (!challenge.resourceMetadata || challenge.resourceMetadata === binding.resource.url)) {
      const server = await state.store.get("server", binding.resource.issuer);
      if (server) return { resource: binding.resource, metadata: server.metadata };
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
    const metadata = await legacyAuthorizationServer({ serverUrl, fetch: state.fetch });
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
    await state.store.set("server", metadata.issuer, { metadata, fetched_at: Date.now() });
    await state.store.set("resource", resource.metadata.resource, resource);
    return { resource, metadata };
  }
  const servers = discovered.metadata.authorization_servers;
  const issuer = await chooseServer(state, servers);
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
  const metadata = await serverMetadata(state, issuer, fresh);
  const resource: StoredResource = {
    metadata: discovered.metadata,
    url: discovered.url,
    issuer,
    fetched_at: Date.now(),
  };
  await state.store.set("resource", resource.metadata.resource, resource);
  state.options.onEvent?.({ type: "discovered", resource: resource.metadata.resource, issuer });
  return { resource, metadata };
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
