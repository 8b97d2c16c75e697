/**
 * The API report of every public subpath (issue 23 item 9): one api-extractor run per entry in
 * package.json "exports", each writing api/gatehouse-auth[.<subpath>].api.md from the built .d.ts
 * (so `npm run build` comes first). A change to what a subpath exports is then a visible diff.
 *
 *   node api/extract.mjs           check: fails (exit 1, the diff printed) when a report differs,
 *                                  is missing, or names a subpath package.json no longer exports
 *   node api/extract.mjs --update  rewrites the reports (and deletes those of removed subpaths)
 *
 * One TypeScript program serves every entry (CompilerState), so the run costs about one compile.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { CompilerState, Extractor, ExtractorConfig } from "@microsoft/api-extractor";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..");
const update = process.argv.includes("--update");
const packageJsonFullPath = join(root, "package.json");
const packageJson = JSON.parse(readFileSync(packageJsonFullPath, "utf8"));
const configPath = join(here, "api-extractor.json");
const base = ExtractorConfig.loadFile(configPath);
const tempFolder = mkdtempSync(join(tmpdir(), "gatehouse-api-"));

/** `.` → gatehouse-auth, `./storage/memory` → gatehouse-auth.storage.memory */
function reportName(subpath) {
  const rest = subpath.replace(/^\.\/?/, "").replaceAll("/", ".");
  return rest ? `${packageJson.name}.${rest}` : packageJson.name;
}

const entries = Object.entries(packageJson.exports).map(([subpath, target]) => {
  const types = typeof target === "string" ? target.replace(/\.js$/, ".d.ts") : target.types;
  return { subpath, name: reportName(subpath), dts: resolve(root, types) };
});

function prepare(entry) {
  const configObject = structuredClone(base);
  configObject.mainEntryPointFilePath = entry.dts;
  configObject.apiReport = {
    ...configObject.apiReport,
    reportFileName: entry.name,
    reportTempFolder: tempFolder,
  };
  return ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: configPath,
    packageJson,
    packageJsonFullPath,
  });
}

let failed = false;
let compilerState;
try {
  const configs = entries.map((entry) => ({ entry, config: prepare(entry) }));
  compilerState = CompilerState.create(configs[0].config, {
    additionalEntryPoints: configs.map(({ config }) => config.mainEntryPointFilePath),
  });
  for (const { entry, config } of configs) {
    const result = Extractor.invoke(config, {
      localBuild: update,
      compilerState,
      printApiReportDiff: !update,
      messageCallback(message) {
        // Keep what says why a report differs (the diff itself); drop api-extractor's chatter
        // ("Analysis will use the bundled TypeScript version …", "API report is unchanged").
        const keep = message.messageId === "console-api-report-diff" || message.logLevel === "error";
        if (message.category === "console" && !keep) message.handled = true;
      },
    });
    if (!result.succeeded) {
      failed = true;
      console.error(`api: ${entry.subpath} (api/${entry.name}.api.md) differs or failed to analyse`);
    } else if (update && result.apiReportChanged) {
      console.log(`api: updated api/${entry.name}.api.md`);
    }
  }
  // A report left for a subpath package.json no longer exports.
  const expected = new Set(entries.map((e) => `${e.name}.api.md`));
  for (const file of readdirSync(here).filter((f) => f.endsWith(".api.md"))) {
    if (expected.has(file)) continue;
    if (update) {
      rmSync(join(here, file));
      console.log(`api: removed api/${file} (no such export)`);
    } else {
      failed = true;
      console.error(`api: api/${file} names no export in package.json`);
    }
  }
} finally {
  rmSync(tempFolder, { recursive: true, force: true });
}
if (failed) {
  console.error(
    update ? "api: update failed" : "api: the public surface changed; review and run `npm run api:update`",
  );
  process.exit(1);
}
console.log(`api: ${entries.length} subpath reports ${update ? "written" : "match"}`);
