/**
 * Runs a TypeScript file on any supported Node (20.11 and later), for examples/:
 *
 *   node --import ./scripts/typescript.mjs examples/mcp/server.ts
 *
 * Node 20 cannot run `.ts` (`--experimental-strip-types` arrived in 22.6), and compiling the
 * examples with `tsc` outside the project's tsconfig trips over their `gatehouse/*` imports. This
 * registers module hooks (scripts/typescript-hooks.mjs) that transpile each `.ts` module with the
 * project's own TypeScript as it loads; `gatehouse/*` imports resolve through package.json
 * `exports` to dist/ (so `npm run build` first). Types are checked by `npm run typecheck`, not here.
 */
import { register } from "node:module";

register("./typescript-hooks.mjs", import.meta.url);
