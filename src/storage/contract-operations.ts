/**
 * The arguments and results of the storage contract's operations (./contract.ts): what an account
 * change, a code redemption, a refresh rotation, a device poll, the supersede decision and a purge
 * take and answer. Moved out of contract.ts so the store interface reads on its own.
 */

import type { OAuthError } from "../shared/errors.js";
import type {
  AccessTokenRecord,
  AuthorizationCodeRecord,
  DeviceAuthorizationRecord,
  GrantRecord,
  RefreshTokenRecord,
  UserRecord,
} from "./contract-records.js";

/**
 * An operator's change to an account ({@link AuthorizationStore.changeUser}). `remove` deletes the
 * user with its consents and upstream identity links; grants keep the id (revoked by
 * {@link AuthorizationStore.endUserAccess}).
 */
export type UserChange = "disable" | "enable" | "make-admin" | "remove-admin" | "remove";

export type UserChangeResult =
  /** `user` as it is now (for `remove`: as it was). */
  | { status: "changed"; user: UserRecord }
  | { status: "not_found" }
  /**
   * Refused: the user is the last enabled administrator, and `disable`, `remove` or `remove-admin`
   * would leave the server with none (nobody could use the admin page). Nothing changed.
   */
  | { status: "last_admin" };

/** What {@link AuthorizationStore.endUserAccess} ended. */
export interface EndedUserAccess {
  /** Grants revoked (with every token of them, and the grants exchanged from them). */
  grants: number;
  /** Browser sessions deleted. */
  sessions: number;
}

/** The user's answer at the verification page (RFC 8628 §3.3). */
export type DeviceAuthorizationDecision =
  | {
      approved: true;
      userId: string;
      approvedScopes: string[];
      sessionHash?: string;
      refreshAllowed: boolean;
    }
  | { approved: false };

export type PollDeviceAuthorizationResult =
  | { status: "issued"; record: DeviceAuthorizationRecord; grant: GrantRecord; refreshIssued: boolean }
  /** `tokens` refused: the authorization is now consumed, nothing was issued. */
  | { status: "refused"; error: OAuthError }
  | { status: "pending" | "slow_down" | "denied" | "expired" | "consumed" | "not_found" };

/** New tokens to write in the same transaction as a code redemption or a refresh rotation. */
export interface IssuedTokens {
  accessToken: Omit<
    AccessTokenRecord,
    "grantId" | "clientId" | "userId" | "scopes" | "resource" | "revokedAt"
  >;
  /** Written only when the code allows refresh (or, on rotation, always). */
  refreshToken?: Omit<
    RefreshTokenRecord,
    "grantId" | "clientId" | "scopes" | "rotatedAt" | "rotatedFrom" | "successorUsedAt"
  >;
  /** Absolute expiry of a grant created by a code redemption. */
  grantExpiresAt: number;
  /**
   * RFC 9449 §5: the DPoP key thumbprint a grant created by this issuance is bound to (the token
   * endpoint decides it from the proof it verified). Ignored by a refresh rotation: the grant exists.
   */
  grantDpopJkt?: string;
}

export type RedeemCodeResult =
  | {
      status: "issued";
      code: AuthorizationCodeRecord;
      grant: GrantRecord;
      refreshIssued: boolean;
      /**
       * The grants this redemption revoked in its own transaction because `supersedes` picked them
       * (empty when none, or when the new grant has no user or session). Absent when the store did
       * not decide: it has no such support, no `supersedes` was given, or `supersedes` threw; the
       * caller then retires superseded grants itself after the commit.
       */
      superseded?: string[];
    }
  /** The code was valid but `check` refused it: the code is now consumed, nothing was issued. */
  | { status: "refused"; error: OAuthError }
  /** Second use: the grant of the first redemption (and every token of it) is now revoked. */
  | { status: "replayed" }
  | { status: "not_found" }
  | { status: "expired" };

export type RotateRefreshResult =
  | { status: "issued"; old: RefreshTokenRecord; grant: GrantRecord; scopes: string[] }
  /** `check` refused: nothing changed, the old token is still usable. */
  | { status: "refused"; error: OAuthError }
  /** A rotated token came back: the whole grant is now revoked. */
  | { status: "reused" }
  | { status: "not_found" }
  | { status: "expired" }
  | { status: "revoked" };

export interface PurgeResult {
  codes: number;
  refreshTokens: number;
  accessTokens: number;
  interactions: number;
  sessions: number;
  clients: number;
  grants: number;
  /** Single-use markers past their expiry ({@link AuthorizationStore.useOnce}). */
  markers: number;
  deviceAuthorizations: number;
}

/** What {@link AuthorizationStore.listGrants} may filter on. */
export interface GrantFilter {
  userId?: string;
  clientId?: string;
  resource?: string;
  sessionHash?: string;
  /** Only grants that are not revoked. */
  active?: boolean;
}

/** A code redemption's checks (client, redirect URI, PKCE, resource): pure and synchronous. */
export type CodeRedemptionCheck = (code: AuthorizationCodeRecord) => OAuthError | undefined;

/** What a code redemption writes; a function of the code when lifetimes depend on what was granted. */
export type CodeRedemptionTokens = IssuedTokens | ((code: AuthorizationCodeRecord) => IssuedTokens);

/**
 * One sign-in's grants for a client and resource: what a code redemption looks up to retire the
 * grants its new one supersedes ({@link AuthorizationStore.listSupersedeCandidates}).
 */
export interface SignInGrantKey {
  userId: string;
  clientId: string;
  resource: string;
  sessionHash: string;
}

/**
 * The parts of an active grant the supersede decision reads: its scopes, creation time and id for
 * the order, and what tells one instance of a client from another (its DPoP key, the step-up a
 * resource asked of it). Resource and session are the key's (repeated so the decision can check
 * them). `dpopJkt` and `stepUpRequestedAt` are present when the grant has them.
 */
export type SupersedeCandidate = Pick<
  GrantRecord,
  "grantId" | "scopes" | "resource" | "sessionHash" | "createdAt" | "dpopJkt" | "stepUpRequestedAt"
>;

/**
 * Which of `candidates` a new grant retires: `candidates` are the active grants of its sign-in
 * (same user, client, resource and session) that the store has committed before it, oldest first
 * (creation time, then id); the answer is the ids of those to revoke (an id that is not a
 * candidate is ignored). Offered all at once because the rule bounds how many grants one sign-in
 * keeps. Pure and synchronous: the store calls it inside the redemption's transaction
 * (authorization-server/grants/superseded-grants.ts decides; the store only applies it).
 */
export type SupersedeDecision = (grant: GrantRecord, candidates: readonly SupersedeCandidate[]) => string[];
