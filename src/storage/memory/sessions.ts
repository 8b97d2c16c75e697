/**
 * The memory store's browser sign-in state (storage contract "Sessions", "Interactions" and
 * "Consents"), apart from index.ts as upstream.ts holds the upstream state. The maps stay in
 * index.ts, whose user removal, end of access and purge also read and write them; the store
 * passes them here with its upstream state, whose token sets a session's end drops.
 */
import type { AuthorizationStore, ConsentRecord, InteractionRecord, SessionRecord } from "../contract.js";
import { StorageConflictError } from "../contract.js";
import { compareBy, isExpired, mergeScopes } from "../rules.js";
import { copy } from "./copy.js";
import type { MemoryUpstream } from "./upstream.js";

function consentKey(userId: string, clientId: string, redirectUri: string): string {
  return JSON.stringify([userId, clientId, redirectUri]);
}

type SessionMethods = Pick<
  AuthorizationStore,
  | "createSession"
  | "getSession"
  | "deleteSession"
  | "createInteraction"
  | "getInteraction"
  | "setInteractionUser"
  | "consumeInteraction"
  | "getConsent"
  | "grantConsent"
  | "revokeConsent"
  | "listConsents"
>;

export function createMemorySessionMethods(
  sessions: Map<string, SessionRecord>,
  interactions: Map<string, InteractionRecord>,
  consents: Map<string, ConsentRecord>,
  upstream: MemoryUpstream,
): SessionMethods {
  return {
    async createSession(session) {
      if (sessions.has(session.idHash)) throw new StorageConflictError("session already exists");
      sessions.set(session.idHash, copy(session));
    },
    async getSession(idHash, now) {
      const session = sessions.get(idHash);
      return session && !isExpired(session.expiresAt, now) ? copy(session) : undefined;
    },
    async deleteSession(idHash) {
      sessions.delete(idHash);
      upstream.dropTokenSetsOf(`session:${idHash}`);
    },

    async createInteraction(interaction) {
      if (interactions.has(interaction.id)) throw new StorageConflictError("interaction already exists");
      interactions.set(interaction.id, copy(interaction));
    },
    async getInteraction(id, now) {
      const interaction = interactions.get(id);
      return interaction && !isExpired(interaction.expiresAt, now) ? copy(interaction) : undefined;
    },
    async setInteractionUser(id, userId) {
      const interaction = interactions.get(id);
      if (interaction) interaction.userId = userId;
    },
    async consumeInteraction(id, now) {
      const interaction = interactions.get(id);
      if (!interaction) return undefined;
      interactions.delete(id);
      return isExpired(interaction.expiresAt, now) ? undefined : copy(interaction);
    },

    async getConsent(userId, clientId, redirectUri) {
      const consent = consents.get(consentKey(userId, clientId, redirectUri));
      return consent && copy(consent);
    },
    async grantConsent(consent) {
      const key = consentKey(consent.userId, consent.clientId, consent.redirectUri);
      const existing = consents.get(key);
      if (existing) {
        existing.scopes = mergeScopes(existing.scopes, consent.scopes);
        existing.updatedAt = consent.updatedAt;
      } else {
        consents.set(key, copy({ ...consent, scopes: mergeScopes([], consent.scopes) }));
      }
    },
    async revokeConsent(userId, clientId, redirectUri) {
      let removed = 0;
      for (const [key, consent] of consents) {
        if (consent.userId !== userId || consent.clientId !== clientId) continue;
        if (redirectUri !== undefined && consent.redirectUri !== redirectUri) continue;
        consents.delete(key);
        removed++;
      }
      return removed;
    },
    async listConsents(userId) {
      return [...consents.values()]
        .filter((c) => userId === undefined || c.userId === userId)
        .sort(compareBy((c) => [c.createdAt, c.userId, c.clientId, c.redirectUri]))
        .map(copy);
    },
  };
}
