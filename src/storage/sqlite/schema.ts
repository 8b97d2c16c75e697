/**
 * Versioned SQLite migrations. A migration is applied once, in order, inside a `BEGIN IMMEDIATE`
 * transaction together with its row in `schema_migrations`, so two processes starting at once
 * cannot both apply it. Never edit a released migration: add a new one.
 */

export interface SqliteMigration {
  version: number;
  description: string;
  sql: string;
}

export const SQLITE_MIGRATIONS: readonly SqliteMigration[] = [
  {
    version: 1,
    description: "initial schema",
    sql: `
CREATE TABLE clients (
  client_id TEXT PRIMARY KEY,
  data TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_used_at INTEGER,
  expires_at INTEGER
) STRICT;
CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE users (
  id TEXT PRIMARY KEY,
  username TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  is_admin INTEGER NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE sessions (
  id_hash TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_expires_at ON sessions (expires_at);

CREATE TABLE interactions (
  id TEXT PRIMARY KEY,
  data TEXT NOT NULL,
  user_id TEXT,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX interactions_expires_at ON interactions (expires_at);

CREATE TABLE consents (
  user_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  scopes TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (user_id, client_id, redirect_uri)
) STRICT;

CREATE TABLE authorization_codes (
  code_hash TEXT PRIMARY KEY,
  grant_id TEXT NOT NULL,
  client_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  scopes TEXT NOT NULL,
  resource TEXT NOT NULL,
  code_challenge TEXT NOT NULL,
  code_challenge_method TEXT NOT NULL,
  refresh_allowed INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  consumed_at INTEGER
) STRICT;
CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

CREATE TABLE grants (
  grant_id TEXT PRIMARY KEY,
  client_id TEXT NOT NULL,
  user_id TEXT,
  scopes TEXT NOT NULL,
  resource TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE INDEX grants_user_id ON grants (user_id);
CREATE INDEX grants_client_id ON grants (client_id);

CREATE TABLE refresh_tokens (
  token_hash TEXT PRIMARY KEY,
  grant_id TEXT NOT NULL REFERENCES grants (grant_id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  rotated_at INTEGER,
  revoked_at INTEGER
) STRICT;
CREATE INDEX refresh_tokens_grant_id ON refresh_tokens (grant_id);
CREATE INDEX refresh_tokens_expires_at ON refresh_tokens (expires_at);

CREATE TABLE access_tokens (
  jti TEXT PRIMARY KEY,
  grant_id TEXT NOT NULL REFERENCES grants (grant_id) ON DELETE CASCADE,
  client_id TEXT NOT NULL,
  user_id TEXT,
  scopes TEXT NOT NULL,
  resource TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  revoked_at INTEGER
) STRICT;
CREATE INDEX access_tokens_grant_id ON access_tokens (grant_id);
CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

CREATE TABLE signing_keys (
  kid TEXT PRIMARY KEY,
  alg TEXT NOT NULL,
  public_jwk TEXT NOT NULL,
  private_jwk TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  retired_at INTEGER,
  expires_at INTEGER
) STRICT;

CREATE TABLE rate_limits (
  key TEXT PRIMARY KEY,
  window_start INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  count INTEGER NOT NULL
) STRICT;

CREATE TABLE cached_documents (
  url TEXT PRIMARY KEY,
  body TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
`,
  },
  {
    version: 2,
    description: "codes: redirect_uri_sent, session_hash; grants: session_hash, step_up_requested_at",
    // A code stored before this migration does not say whether its request carried redirect_uri;
    // true (the token request must repeat it, OAuth 2.1 §4.1.3) is the stricter reading, and such
    // codes expire within a minute anyway. The default stays so that an instance still running
    // the previous version (a rolling upgrade) keeps inserting codes.
    sql: `
ALTER TABLE authorization_codes ADD COLUMN redirect_uri_sent INTEGER NOT NULL DEFAULT 1;
ALTER TABLE authorization_codes ADD COLUMN session_hash TEXT;
ALTER TABLE grants ADD COLUMN session_hash TEXT;
ALTER TABLE grants ADD COLUMN step_up_requested_at INTEGER;
`,
  },
  {
    version: 3,
    description: "codes, grants: dpop_jkt; single_use_markers; device_authorizations",
    // Rows written before this migration are not DPoP-bound (dpop_jkt NULL), which is what they were.
    // The marker key is bounded like the contract says (MAX_MARKER_KEY_LENGTH); the store refuses a
    // longer key before it gets here, the CHECK keeps any other writer to the same bound.
    sql: `
ALTER TABLE authorization_codes ADD COLUMN dpop_jkt TEXT;
ALTER TABLE grants ADD COLUMN dpop_jkt TEXT;

CREATE TABLE single_use_markers (
  marker_key TEXT PRIMARY KEY CHECK (length(marker_key) BETWEEN 1 AND 512),
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX single_use_markers_expires_at ON single_use_markers (expires_at);

CREATE TABLE device_authorizations (
  device_code_hash TEXT PRIMARY KEY,
  user_code_hash TEXT NOT NULL UNIQUE,
  client_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  resource TEXT NOT NULL,
  poll_interval INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  last_polled_at INTEGER,
  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
  user_id TEXT,
  approved_scopes TEXT,
  session_hash TEXT,
  refresh_allowed INTEGER,
  grant_id TEXT NOT NULL,
  dpop_jkt TEXT
) STRICT;
CREATE INDEX device_authorizations_expires_at ON device_authorizations (expires_at);
`,
  },
  {
    version: 4,
    description: "upstream_logins, upstream_identities (sign-in through upstream identity providers)",
    // An identity is keyed by (provider, subject), never by e-mail; a user may have several.
    sql: `
CREATE TABLE upstream_logins (
  state_hash TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL,
  browser_binding_hash TEXT NOT NULL,
  interaction_id TEXT,
  return_to TEXT,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE INDEX upstream_logins_expires_at ON upstream_logins (expires_at);

CREATE TABLE upstream_identities (
  provider_id TEXT NOT NULL,
  subject TEXT NOT NULL,
  user_id TEXT NOT NULL,
  email TEXT,
  email_verified INTEGER NOT NULL,
  display_name TEXT,
  created_at INTEGER NOT NULL,
  last_sign_in_at INTEGER NOT NULL,
  PRIMARY KEY (provider_id, subject)
) STRICT;
CREATE INDEX upstream_identities_user_id ON upstream_identities (user_id);
`,
  },
  {
    version: 5,
    description: "grants: index of the active grants by user and sign-in",
    // Superseded grants (grants/superseded-grants.ts) look up a sign-in's active grants after every
    // approved flow; through grants_user_id that read visited every grant the user ever had, so
    // each flow cost more than the one before. Revoked grants leave this index.
    sql: `
CREATE INDEX grants_active_by_session ON grants (user_id, session_hash) WHERE revoked_at IS NULL;
`,
  },
  {
    version: 6,
    description: "upstream_token_sets (an upstream provider's tokens kept for resource servers, sealed)",
    // holder is 'session:<session hash>' or 'grant:<grant id>' (sql/upstream-tokens.ts); sealed is
    // ciphertext under the key-encryption key, never a token in clear.
    sql: `
CREATE TABLE upstream_token_sets (
  holder TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  sealed TEXT NOT NULL,
  version INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  expires_at INTEGER,
  PRIMARY KEY (holder, provider_id)
) STRICT;
CREATE INDEX upstream_token_sets_expires_at ON upstream_token_sets (expires_at);
`,
  },
  {
    version: 7,
    description: "refresh_tokens: rotated_from, successor_used_at (the refresh race window)",
    // A successor names the token it was rotated from; that token's successor_used_at is set when
    // one of its successors is first used, which closes its race window (storage/rules.ts
    // isRefreshTokenReuse). Rows written before this migration have neither: a rotated one is
    // judged by the time window alone, and an instance still running the previous version (a
    // rolling upgrade) keeps inserting tokens without them.
    sql: `
ALTER TABLE refresh_tokens ADD COLUMN rotated_from TEXT;
ALTER TABLE refresh_tokens ADD COLUMN successor_used_at INTEGER;
`,
  },
  {
    version: 8,
    description: "grants: exchanged_from (token exchange chains) and its index",
    // A grant made by token exchange (RFC 8693) names the grant it was exchanged from; revoking a
    // grant revokes down the chain (sql/statements.ts revokeGrantStatements), found through the
    // index. Only exchanged grants have the column set, so the index holds only them. Rows written
    // before this migration have none: they were never linked, and stay as they were.
    sql: `
ALTER TABLE grants ADD COLUMN exchanged_from TEXT;
CREATE INDEX grants_exchanged_from ON grants (exchanged_from) WHERE exchanged_from IS NOT NULL;
`,
  },
  {
    version: 9,
    description: "users: disabled_at (an account an operator disabled)",
    // NULL for every existing account: each stays enabled. An instance still running the previous
    // version (a rolling upgrade) does not read the column, so it would let a disabled user sign in
    // until it is upgraded; disable users after every instance runs this version (the grants and
    // sessions the disabling ended stay ended either way).
    sql: `
ALTER TABLE users ADD COLUMN disabled_at INTEGER;
`,
  },
];
