/**
 * Versioned PostgreSQL migrations. `migrate()` applies them inside one transaction holding a
 * transaction-scoped advisory lock, so instances starting together apply each migration once and
 * none sees a half-built schema. Never edit a released migration: add a new one.
 *
 * Times are `bigint` milliseconds since the epoch; lists are `jsonb` arrays.
 */

export interface PostgresMigration {
  version: number;
  description: string;
  sql: string;
}

export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  {
    version: 1,
    description: "initial schema",
    sql: `
CREATE TABLE clients (
  client_id text PRIMARY KEY,
  data jsonb NOT NULL,
  created_at bigint NOT NULL,
  last_used_at bigint,
  expires_at bigint
);
CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE users (
  id text PRIMARY KEY,
  username text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  is_admin boolean NOT NULL,
  created_at bigint NOT NULL
);

CREATE TABLE sessions (
  id_hash text PRIMARY KEY,
  user_id text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX sessions_expires_at ON sessions (expires_at);

CREATE TABLE interactions (
  id text PRIMARY KEY,
  data jsonb NOT NULL,
  user_id text,
  expires_at bigint NOT NULL
);
CREATE INDEX interactions_expires_at ON interactions (expires_at);

CREATE TABLE consents (
  user_id text NOT NULL,
  client_id text NOT NULL,
  redirect_uri text NOT NULL,
  scopes jsonb NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (user_id, client_id, redirect_uri)
);

CREATE TABLE authorization_codes (
  code_hash text PRIMARY KEY,
  grant_id text NOT NULL,
  client_id text NOT NULL,
  user_id text NOT NULL,
  redirect_uri text NOT NULL,
  scopes jsonb NOT NULL,
  resource text NOT NULL,
  code_challenge text NOT NULL,
  code_challenge_method text NOT NULL,
  refresh_allowed boolean NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  consumed_at bigint
);
CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

CREATE TABLE grants (
  grant_id text PRIMARY KEY,
  client_id text NOT NULL,
  user_id text,
  scopes jsonb NOT NULL,
  resource text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  revoked_at bigint
);
CREATE INDEX grants_user_id ON grants (user_id);
CREATE INDEX grants_client_id ON grants (client_id);

CREATE TABLE refresh_tokens (
  token_hash text PRIMARY KEY,
  grant_id text NOT NULL REFERENCES grants (grant_id) ON DELETE CASCADE,
  client_id text NOT NULL,
  scopes jsonb NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  rotated_at bigint,
  revoked_at bigint
);
CREATE INDEX refresh_tokens_grant_id ON refresh_tokens (grant_id);
CREATE INDEX refresh_tokens_expires_at ON refresh_tokens (expires_at);

CREATE TABLE access_tokens (
  jti text PRIMARY KEY,
  grant_id text NOT NULL REFERENCES grants (grant_id) ON DELETE CASCADE,
  client_id text NOT NULL,
  user_id text,
  scopes jsonb NOT NULL,
  resource text NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  revoked_at bigint
);
CREATE INDEX access_tokens_grant_id ON access_tokens (grant_id);
CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

CREATE TABLE signing_keys (
  kid text PRIMARY KEY,
  alg text NOT NULL,
  public_jwk jsonb NOT NULL,
  private_jwk jsonb NOT NULL,
  created_at bigint NOT NULL,
  retired_at bigint,
  expires_at bigint
);

CREATE TABLE rate_limits (
  key text PRIMARY KEY,
  window_start bigint NOT NULL,
  expires_at bigint NOT NULL,
  count integer NOT NULL
);

CREATE TABLE cached_documents (
  url text PRIMARY KEY,
  body text NOT NULL,
  expires_at bigint NOT NULL
);
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
ALTER TABLE authorization_codes ADD COLUMN redirect_uri_sent boolean NOT NULL DEFAULT true;
ALTER TABLE authorization_codes ADD COLUMN session_hash text;
ALTER TABLE grants ADD COLUMN session_hash text;
ALTER TABLE grants ADD COLUMN step_up_requested_at bigint;
`,
  },
  {
    version: 3,
    description: "codes, grants: dpop_jkt; single_use_markers; device_authorizations",
    // Rows written before this migration are not DPoP-bound (dpop_jkt NULL), which is what they were.
    // The marker key is bounded like the contract says (MAX_MARKER_KEY_LENGTH, in characters).
    sql: `
ALTER TABLE authorization_codes ADD COLUMN dpop_jkt text;
ALTER TABLE grants ADD COLUMN dpop_jkt text;

CREATE TABLE single_use_markers (
  marker_key varchar(512) PRIMARY KEY CHECK (marker_key <> ''),
  expires_at bigint NOT NULL
);
CREATE INDEX single_use_markers_expires_at ON single_use_markers (expires_at);

CREATE TABLE device_authorizations (
  device_code_hash text PRIMARY KEY,
  user_code_hash text NOT NULL UNIQUE,
  client_id text NOT NULL,
  scopes jsonb NOT NULL,
  resource text NOT NULL,
  poll_interval integer NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  last_polled_at bigint,
  status text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'consumed')),
  user_id text,
  approved_scopes jsonb,
  session_hash text,
  refresh_allowed boolean,
  grant_id text NOT NULL,
  dpop_jkt text
);
CREATE INDEX device_authorizations_expires_at ON device_authorizations (expires_at);
`,
  },
  {
    version: 4,
    description: "upstream_logins, upstream_identities (sign-in through upstream identity providers)",
    // An identity is keyed by (provider, subject), never by e-mail; a user may have several.
    sql: `
CREATE TABLE upstream_logins (
  state_hash text PRIMARY KEY,
  provider_id text NOT NULL,
  browser_binding_hash text NOT NULL,
  interaction_id text,
  return_to text,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX upstream_logins_expires_at ON upstream_logins (expires_at);

CREATE TABLE upstream_identities (
  provider_id text NOT NULL,
  subject text NOT NULL,
  user_id text NOT NULL,
  email text,
  email_verified boolean NOT NULL,
  display_name text,
  created_at bigint NOT NULL,
  last_sign_in_at bigint NOT NULL,
  PRIMARY KEY (provider_id, subject)
);
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
  holder text NOT NULL,
  provider_id text NOT NULL,
  user_id text NOT NULL,
  sealed text NOT NULL,
  version integer NOT NULL,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  expires_at bigint,
  PRIMARY KEY (holder, provider_id)
);
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
ALTER TABLE refresh_tokens ADD COLUMN rotated_from text;
ALTER TABLE refresh_tokens ADD COLUMN successor_used_at bigint;
`,
  },
  {
    version: 8,
    description: "grants: exchanged_from (token exchange chains) and its index",
    // A grant made by token exchange (RFC 8693) names the grant it was exchanged from; revoking a
    // grant revokes down the chain (sql/statements.ts revokeGrantStatements), found through the
    // index. Only exchanged grants have the column set, so the index holds only them.
    sql: `
ALTER TABLE grants ADD COLUMN exchanged_from text;
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
ALTER TABLE users ADD COLUMN disabled_at bigint;
`,
  },
];
