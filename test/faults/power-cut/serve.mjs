/**
 * TEST ONLY entry for the power-loss test: the built CLI's own `gatehouse serve` command, its SQLite
 * store opened in the durability mode GATEHOUSE_TEST_SQLITE_DURABILITY names ("normal", "full", or
 * the broken "unsafe-normal-without-fsync" the test must catch), checkpointing often. The shipped CLI
 * knows nothing of it.
 * Usage: node test/faults/power-cut/serve.mjs <serve flags>.
 */
const { setSqliteDurabilityForTests } = await import("../../../dist/storage/sqlite/wal-sync.js");
const mode = process.env.GATEHOUSE_TEST_SQLITE_DURABILITY;
// Checkpoints early and often (the default waits for 256 commits): the power cuts must also land
// while the checkpointer copies pages into the database file.
if (mode) setSqliteDurabilityForTests(mode, { startAfterCommits: 8, intervalMs: 10 });
const { serve } = await import("../../../dist/cli/commands/serve.js");
process.exitCode = await serve(process.argv.slice(2));
