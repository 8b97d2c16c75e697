/**
 * Rendering of a {@link CheckReport}: grouped human-readable text (✔ / ✖ / ! marks, ANSI colour only
 * when asked) and one JSON object. Failures and warnings name the spec rule they come from.
 */
import { type CheckReport, type Finding, GROUP_TITLES, type Group, type Outcome } from "./types.js";

const MARKS: Record<Outcome, string> = { pass: "✔", fail: "✖", warn: "!", info: "·", skip: "-" };

const COLOURS: Record<Outcome, string> = {
  pass: "\u001b[32m",
  fail: "\u001b[31m",
  warn: "\u001b[33m",
  info: "\u001b[36m",
  skip: "\u001b[2m",
};
const RESET = "\u001b[0m";
const BOLD = "\u001b[1m";
const DIM = "\u001b[2m";

// Untrusted text (messages quote server-supplied values) must not smuggle terminal escapes.
function clean(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: stripping control characters on purpose
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, "?");
}

export interface HumanFormatOptions {
  /** ANSI colours (the CLI turns them on only for a TTY without NO_COLOR). */
  color?: boolean;
  /** Also list passing, informational and skipped findings' details (default: all findings shown). */
  verbose?: boolean;
}

/** The report as grouped text, ending with a summary line. */
export function formatHuman(report: CheckReport, options: HumanFormatOptions = {}): string {
  const paint = (code: string, text: string) => (options.color ? `${code}${text}${RESET}` : text);
  const lines: string[] = [];
  lines.push(
    `${paint(BOLD, `gatehouse check ${clean(report.resource)}`)} (spec revision ${report.revision})`,
  );
  const groups = new Map<Group, Finding[]>();
  for (const f of report.findings) {
    const list = groups.get(f.group) ?? [];
    list.push(f);
    groups.set(f.group, list);
  }
  for (const group of Object.keys(GROUP_TITLES) as Group[]) {
    const findings = groups.get(group);
    if (!findings?.length) continue;
    lines.push("", paint(BOLD, GROUP_TITLES[group]));
    for (const f of findings) {
      const mark = paint(COLOURS[f.outcome], MARKS[f.outcome]);
      lines.push(`  ${mark} ${clean(f.title)}: ${clean(f.message)}`);
      if (f.subject) lines.push(paint(DIM, `      at ${clean(f.subject)}`));
      if (f.outcome === "fail" || f.outcome === "warn" || options.verbose) {
        lines.push(paint(DIM, `      [${f.rule}] ${f.level} · ${f.spec}`));
      }
    }
  }
  const s = report.summary;
  lines.push(
    "",
    `${s.pass} passed, ${s.fail} failed, ${s.warn} warnings, ${s.info} notes, ${s.skip} skipped; ${report.exchanges.length} requests`,
  );
  lines.push(
    report.ok
      ? paint(COLOURS.pass, "Result: every MUST rule checked holds")
      : paint(COLOURS.fail, "Result: FAIL — at least one MUST rule does not hold"),
  );
  return `${lines.join("\n")}\n`;
}

/** The report as one JSON object (with a trailing newline). */
export function formatJson(report: CheckReport): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}
