import { createMemoryStore } from "../../src/storage/memory/index.js";
import { runStoreContract } from "./contract.js";

runStoreContract("memory", async () => createMemoryStore());
