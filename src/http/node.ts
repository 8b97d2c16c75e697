/**
 * node:http adapter (the `gatehouse/node` entry point): translates `IncomingMessage` → web
 * `Request` and web `Response` → `ServerResponse`. No protocol logic lives here (DESIGN.md
 * principle 1). The listener lives in `node-listener.ts`, the bearer gate for node-style handlers
 * in `node-require-bearer.ts`, the fast text response in `text-response.ts`; this module re-exports
 * them.
 */
export {
  clientAddress,
  type FetchHandler,
  type ListeningServer,
  listen,
  type NodeListenerOptions,
  setClientAddress,
  toNodeListener,
} from "./node-listener.js";
export { type NodeRequireBearerOptions, nodeRequireBearer } from "./node-require-bearer.js";
export { type NodeRequireOperationOptions, nodeRequireOperation } from "./node-require-operation.js";
export { textResponse } from "./text-response.js";
