/**
 * `gatehouse-auth`, the package root: the shared vocabulary every role speaks — the errors
 * (`OAuthError`, `GatehouseError`, `GatehouseTypeError` and the closed set of codes), the spec
 * revisions, scopes and `ScopeHierarchy`, the canonical resource URI (RFC 8707 §2),
 * `WWW-Authenticate` parsing and building (RFC 9110 §11.6.1, RFC 6750 §3), constant-time
 * comparison, the loggers and the DPoP proof verifier. The list is in src/shared/index.ts; it is
 * published here only (no `gatehouse-auth/shared`: one public entry per concept).
 *
 * Each role has its own subpath so that importing one never loads another (DESIGN.md):
 * `gatehouse-auth/resource-server`, `gatehouse-auth/client`, `gatehouse-auth/authorization-server`,
 * `gatehouse-auth/check`, `gatehouse-auth/storage[/memory|/sqlite|/postgres|/testing]`, and the
 * adapters `gatehouse-auth/node`, `gatehouse-auth/express`, `gatehouse-auth/hono`.
 */
export * from "./shared/index.js";
