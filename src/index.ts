/**
 * `gatehouse`: the shared primitives every role uses — the errors (`OAuthError`, `GatehouseError`,
 * `GatehouseTypeError` and the closed set of codes), the spec revisions,
 * scopes and `ScopeHierarchy`, the canonical resource URI (RFC 8707 §2), `WWW-Authenticate`
 * parsing and building (RFC 9110 §11.6.1, RFC 6750 §3), constant-time comparison and loggers.
 *
 * Each role has its own subpath so that importing one never loads another (DESIGN.md):
 * `gatehouse/resource-server`, `gatehouse/client`, `gatehouse/authorization-server`,
 * `gatehouse/storage[/memory|/sqlite|/postgres]`, and the adapters `gatehouse/node`,
 * `gatehouse/express`, `gatehouse/hono`.
 */
export * from "./shared/index.js";
