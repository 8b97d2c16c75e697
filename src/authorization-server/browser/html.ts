/**
 * HTML for the login, consent, account and error pages: one escaping function, one layout, one
 * stylesheet. Nothing here runs script and nothing loads from another origin, so the pages work
 * without JavaScript under `default-src 'none'` (SECURITY.md "Consent and login pages").
 */

import { createHash } from "node:crypto";

/** A fragment of HTML that is already safe to emit (built only by {@link html}). */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/**
 * Escapes text for element content and quoted attribute values. Client names, scopes, hosts and
 * error descriptions all come from outside and may carry markup; they are always rendered as text.
 */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

type Interpolation = SafeHtml | string | number | undefined | null | false | readonly Interpolation[];

function render(value: Interpolation): string {
  if (value === undefined || value === null || value === false) return "";
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join("");
  return escapeHtml(String(value));
}

/** Tagged template: every interpolated string is escaped; nested `html` fragments are kept. */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return new SafeHtml(out);
}

/**
 * The one stylesheet, inlined and allowed by its hash in the CSP (`style-src 'sha256-…'`), so no
 * extra request and no `'unsafe-inline'`.
 */
const STYLE = `
*{box-sizing:border-box}
body{margin:0;background:#f3f4f6;color:#111827;font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:30rem;margin:3rem auto;padding:2rem;background:#fff;border:1px solid #e5e7eb;border-radius:12px;box-shadow:0 1px 3px rgba(0,0,0,.06)}
h1{font-size:1.35rem;margin:0 0 1rem;line-height:1.3}
h2{font-size:1rem;margin:1.25rem 0 .5rem}
p{margin:.5rem 0}
.muted{color:#6b7280;font-size:.9rem}
.name{font-weight:700;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:auto 1fr;gap:.25rem 1rem;margin:1rem 0;padding:.75rem 1rem;background:#f9fafb;border-radius:8px;font-size:.92rem}
dt{color:#6b7280}
dd{margin:0;font-weight:600;overflow-wrap:anywhere}
ul.scopes{list-style:none;padding:0;margin:.25rem 0}
ul.scopes li{padding:.5rem .75rem;border:1px solid #e5e7eb;border-radius:8px;margin:.35rem 0}
ul.scopes li.granted{background:#f9fafb;color:#4b5563}
code{font:.85em ui-monospace,SFMono-Regular,Menlo,monospace;background:#eef2ff;padding:.05rem .3rem;border-radius:4px;overflow-wrap:anywhere}
.warning{background:#fffbeb;border:1px solid #f59e0b;color:#78350f;border-radius:8px;padding:.6rem .8rem;margin:1rem 0}
.error{background:#fef2f2;border:1px solid #ef4444;color:#7f1d1d;border-radius:8px;padding:.6rem .8rem;margin:1rem 0}
label{display:block;margin:.75rem 0 .25rem;font-weight:600}
input[type=text],input[type=password]{width:100%;padding:.55rem .7rem;font:inherit;border:1px solid #d1d5db;border-radius:8px}
.actions{display:flex;gap:.75rem;margin-top:1.5rem}
button,a.button{flex:1;padding:.65rem 1rem;font:inherit;font-weight:600;border-radius:8px;border:1px solid #d1d5db;background:#fff;color:#111827;cursor:pointer;text-align:center;text-decoration:none}
button.primary{background:#1d4ed8;border-color:#1d4ed8;color:#fff}
table{width:100%;border-collapse:collapse;font-size:.9rem}
td{padding:.4rem 0;border-bottom:1px solid #e5e7eb;vertical-align:top;overflow-wrap:anywhere}
td form{margin:0}
td button{padding:.3rem .6rem;white-space:nowrap}
table.consents td.withdraw{width:1%;padding-left:.75rem;text-align:right}
main.wide{max-width:80rem}
th{text-align:left;padding:.4rem .5rem .4rem 0;border-bottom:2px solid #e5e7eb;color:#4b5563;font-weight:600;white-space:nowrap}
main.wide td{padding:.4rem .5rem .4rem 0;overflow-wrap:break-word}
main.wide td.nowrap,main.wide td button{white-space:nowrap}
.notice{background:#ecfdf5;border:1px solid #10b981;color:#064e3b;border-radius:8px;padding:.6rem .8rem;margin:1rem 0}
.table-scroll{overflow-x:auto}
`.trim();

/** `'sha256-…'` source expression for {@link STYLE} (CSP Level 3 hash-source). */
export const STYLE_HASH_SOURCE = `'sha256-${createHash("sha256").update(STYLE, "utf8").digest("base64")}'`;

/** A complete page around `body`; `wide` widens the column for tables (the admin page). */
export function page(title: string, body: SafeHtml, options: { wide?: boolean } = {}): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<style>${new SafeHtml(STYLE)}</style>
</head>
<body>
${options.wide ? new SafeHtml('<main class="wide">') : new SafeHtml("<main>")}
${body}
</main>
</body>
</html>
`.value;
}
