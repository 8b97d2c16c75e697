/**
 * `gatehouse/shared`: the primitives every role uses.
 */
export * from "./crypto.js";
export * from "./dpop-proof.js";
export * from "./errors.js";
export * from "./http.js";
export * from "./log.js";
export * from "./resource-uri.js";
export * from "./revision.js";
export * from "./scopes.js";
export * from "./www-authenticate.js";
