/**
 * The API report of every public subpath (issue 23 item 9): one api-extractor run per entry in
 * package.json "exports", each making api/gatehouse-auth[.<subpath>].api.md from the built .d.ts
 * (so `npm run build` comes first). A change to what a subpath exports is then a visible diff.
 *
 *   node api/extract.mjs           check: fails (exit 1, the diff printed) when a report differs,
 *                                  is missing, or names a subpath package.json no longer exports
 *   node api/extract.mjs --update  rewrites the reports (and deletes those of removed subpaths)
 *
 * api-extractor writes each report into a temporary folder; this script compares it with api/
 * and prints the changed lines.
 * One normalisation first: a warning that api-extractor cannot attach to a declaration names the
 * .d.ts file and line it came from, which moves with every comment or file move and says nothing
 * about the surface; the path and line are dropped, the warning kept. One TypeScript program
 * serves every entry (CompilerState), so the run costs about one compile.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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
const made = mkdtempSync(join(tmpdir(), "gatehouse-api-"));

/** `.` → gatehouse-auth, `./storage/memory` → gatehouse-auth.storage.memory */
function reportName(subpath) {
  const rest = subpath.replace(/^\.\/?/, "").replaceAll("/", ".");
  return rest ? `${packageJson.name}.${rest}` : packageJson.name;
}

/**
 * The changed lines of `after` against `before`, `-`/`+` with two lines of context (a longest
 * common subsequence of lines: the reports are a few hundred lines, so the table stays small).
 */
function lineDiff(before, after) {
  const a = before.split("\n");
  const b = after.split("\n");
  const common = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      common[i][j] = a[i] === b[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      ops.push([" ", a[i++]]);
      j++;
    } else if (j < b.length && (i === a.length || common[i][j + 1] >= common[i + 1][j])) {
      ops.push(["+", b[j++]]);
    } else {
      ops.push(["-", a[i++]]);
    }
  }
  const near = (k) => ops.slice(Math.max(0, k - 2), k + 3).some(([op]) => op !== " ");
  const lines = [];
  ops.forEach(([op, line], k) => {
    if (near(k)) lines.push(`${op} ${line}`);
    else if (lines.at(-1) !== "  …") lines.push("  …");
  });
  return lines.join("\n");
}

/** `// dist/x/y.d.ts:108:5 - (ae-forgotten-export) …` → `// (ae-forgotten-export) …` */
function normalise(report) {
  return report.replace(/^\/\/ \S+\.d\.ts:\d+:\d+ - (\(ae-[a-z-]+\) .*)$/gm, "// $1");
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
    reportFolder: made,
    reportTempFolder: made,
  };
  return ExtractorConfig.prepare({
    configObject,
    configObjectFullPath: configPath,
    packageJson,
    packageJsonFullPath,
  });
}

let failed = false;
try {
  const configs = entries.map((entry) => ({ entry, config: prepare(entry) }));
  const compilerState = CompilerState.create(configs[0].config, {
    additionalEntryPoints: configs.map(({ config }) => config.mainEntryPointFilePath),
  });
  for (const { entry, config } of configs) {
    // localBuild: write the report (into `made`) rather than judge it; the judging is below.
    let result;
    try {
      result = Extractor.invoke(config, {
        localBuild: true,
        compilerState,
        messageCallback(message) {
          // api-extractor's own chatter ("Analysis will use the bundled TypeScript version …").
          if (message.category === "console" && message.logLevel !== "error") message.handled = true;
        },
      });
    } catch (error) {
      // A .d.ts api-extractor cannot follow (a build that failed half way): this entry fails, the rest run.
      failed = true;
      console.error(`api: ${entry.subpath}: api-extractor stopped: ${error.message.split("\n")[0]}`);
      continue;
    }
    const file = `${entry.name}.api.md`;
    if (!result.succeeded) {
      failed = true;
      console.error(`api: ${entry.subpath}: api-extractor failed (${result.errorCount} errors)`);
      continue;
    }
    const fresh = normalise(readFileSync(join(made, file), "utf8"));
    const kept = join(here, file);
    const old = existsSync(kept) ? readFileSync(kept, "utf8") : undefined;
    if (old === fresh) continue;
    if (update) {
      writeFileSync(kept, fresh);
      console.log(`api: ${old === undefined ? "wrote" : "updated"} api/${file}`);
      continue;
    }
    failed = true;
    if (old === undefined) {
      console.error(`api: ${entry.subpath}: api/${file} is missing`);
    } else {
      console.error(`api: ${entry.subpath}: api/${file} differs from the build (- kept, + built):`);
      console.error(lineDiff(old, fresh));
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
  rmSync(made, { recursive: true, force: true });
}
if (failed) {
  console.error(
    update ? "api: update failed" : "api: the public surface changed; review it and run `npm run api:update`",
  );
  process.exit(1);
}
console.log(`api: ${entries.length} subpath reports ${update ? "up to date" : "match the build"}`);
