/**
 * The SQL of sign-in through upstream identity providers, shared word for word by SQLite and
 * PostgreSQL: upstream logins (single-use, consumed by one `DELETE ... RETURNING`) and the links of
 * upstream identities to users, with their row mapping.
 */
import type {
  AuthorizationStore,
  UpstreamIdentityRecord,
  UpstreamLoginRecord,
  UserRecord,
} from "../contract.js";
import type { Row } from "./rows.js";
import { type PlaceholderStyle, render, type Statement } from "./statements.js";

export function rowToUpstreamLogin(row: Row): UpstreamLoginRecord {
  return {
    stateHash: String(row.state_hash),
    providerId: String(row.provider_id),
    browserBindingHash: String(row.browser_binding_hash),
    ...(row.interaction_id == null ? {} : { interactionId: String(row.interaction_id) }),
    ...(row.return_to == null ? {} : { returnTo: String(row.return_to) }),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
  };
}

export function rowToUpstreamIdentity(row: Row): UpstreamIdentityRecord {
  return {
    providerId: String(row.provider_id),
    subject: String(row.subject),
    userId: String(row.user_id),
    ...(row.email == null ? {} : { email: String(row.email) }),
    emailVerified: Boolean(row.email_verified),
    ...(row.display_name == null ? {} : { displayName: String(row.display_name) }),
    createdAt: Number(row.created_at),
    lastSignInAt: Number(row.last_sign_in_at),
  };
}

export function insertUpstreamLoginStatement(style: PlaceholderStyle, login: UpstreamLoginRecord): Statement {
  return render(
    `INSERT INTO upstream_logins (state_hash, provider_id, browser_binding_hash, interaction_id, return_to, created_at, expires_at)
     VALUES (:stateHash, :providerId, :bindingHash, :interactionId, :returnTo, :createdAt, :expiresAt)`,
    {
      stateHash: login.stateHash,
      providerId: login.providerId,
      bindingHash: login.browserBindingHash,
      interactionId: login.interactionId ?? null,
      returnTo: login.returnTo ?? null,
      createdAt: login.createdAt,
      expiresAt: login.expiresAt,
    },
    style,
  );
}

/** One statement: the row goes to exactly one caller, whichever instance runs it. */
export function consumeUpstreamLoginStatement(style: PlaceholderStyle, stateHash: string): Statement {
  return render(
    "DELETE FROM upstream_logins WHERE state_hash = :stateHash RETURNING *",
    { stateHash },
    style,
  );
}

export function getUpstreamIdentityStatement(
  style: PlaceholderStyle,
  providerId: string,
  subject: string,
): Statement {
  return render(
    "SELECT * FROM upstream_identities WHERE provider_id = :providerId AND subject = :subject",
    { providerId, subject },
    style,
  );
}

export function insertUpstreamIdentityStatement(
  style: PlaceholderStyle,
  identity: UpstreamIdentityRecord,
  asBoolean: (value: boolean) => unknown,
): Statement {
  return render(
    `INSERT INTO upstream_identities (provider_id, subject, user_id, email, email_verified, display_name, created_at, last_sign_in_at)
     VALUES (:providerId, :subject, :userId, :email, :emailVerified, :displayName, :createdAt, :lastSignInAt)`,
    {
      providerId: identity.providerId,
      subject: identity.subject,
      userId: identity.userId,
      email: identity.email ?? null,
      emailVerified: asBoolean(identity.emailVerified),
      displayName: identity.displayName ?? null,
      createdAt: identity.createdAt,
      lastSignInAt: identity.lastSignInAt,
    },
    style,
  );
}

export function insertUserStatement(
  style: PlaceholderStyle,
  user: UserRecord,
  asBoolean: (value: boolean) => unknown,
): Statement {
  return render(
    "INSERT INTO users (id, username, password_hash, is_admin, created_at) VALUES (:id, :username, :passwordHash, :isAdmin, :createdAt)",
    {
      id: user.id,
      username: user.username,
      passwordHash: user.passwordHash,
      isAdmin: asBoolean(user.isAdmin),
      createdAt: user.createdAt,
    },
    style,
  );
}

export function recordUpstreamSignInStatement(
  style: PlaceholderStyle,
  update: Pick<
    UpstreamIdentityRecord,
    "providerId" | "subject" | "email" | "emailVerified" | "displayName" | "lastSignInAt"
  >,
  asBoolean: (value: boolean) => unknown,
): Statement {
  return render(
    `UPDATE upstream_identities SET email = :email, email_verified = :emailVerified, display_name = :displayName,
     last_sign_in_at = :lastSignInAt WHERE provider_id = :providerId AND subject = :subject`,
    {
      providerId: update.providerId,
      subject: update.subject,
      email: update.email ?? null,
      emailVerified: asBoolean(update.emailVerified),
      displayName: update.displayName ?? null,
      lastSignInAt: update.lastSignInAt,
    },
    style,
  );
}

/** The store methods of upstream sign-in state and kept upstream tokens, as each SQL backend builds them. */
export type UpstreamStoreMethods = Pick<
  AuthorizationStore,
  | "createUpstreamLogin"
  | "consumeUpstreamLogin"
  | "getUpstreamIdentity"
  | "linkUpstreamIdentity"
  | "createUserWithUpstreamIdentity"
  | "recordUpstreamSignIn"
  | "keepSessionUpstreamTokens"
  | "bindUpstreamTokens"
  | "getUpstreamTokens"
  | "replaceUpstreamTokens"
  | "deleteUpstreamTokens"
>;
