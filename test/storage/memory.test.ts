/** The storage contract suite (`gatehouse-auth/storage/testing`) against the in-memory store. */

import { createMemoryStore } from "../../src/storage/memory/index.js";
import { runStorageContract } from "../../src/storage/testing/index.js";

runStorageContract({ name: "memory", create: async () => createMemoryStore() });
