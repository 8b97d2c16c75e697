/**
 * TEST-ONLY entry for the crash tests: the built CLI's own `gatehouse serve` command, with its store
 * wrapped by the crash switch (./fault-injection.ts), armed by GATEHOUSE_TEST_FAULT.
 * The shipped CLI knows nothing of it. Usage: node test/faults/serve-with-fault.mjs <serve flags>.
 */
import { register } from "node:module";

register("../support/typescript-hooks.mjs", import.meta.url);
const { withFaultInjection } = await import("./fault-injection.ts");
const { serve } = await import("../../dist/cli/commands/serve.js");
process.exitCode = await serve(process.argv.slice(2), { wrapStore: (store) => withFaultInjection(store) });
