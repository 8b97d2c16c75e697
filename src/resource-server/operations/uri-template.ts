/**
 * Matching resource URIs against the URI templates of a policy: RFC 6570 level 1 (`{var}`, one
 * path segment's worth: no `/`, `?` or `#`) and level 2 reserved expansion (`{+var}`, anything).
 * The same subset MCP servers use for resource templates; other operators are refused when the
 * policy is compiled, never guessed at.
 */

export interface UriTemplate {
  readonly source: string;
  readonly variables: readonly string[];
  /** The variables' values when `uri` matches the whole template, else `undefined`. */
  match(uri: string): Record<string, string> | undefined;
}

const EXPRESSION = /\{([^{}]*)\}/g;
const NAME = /^[A-Za-z0-9_]+$/;

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Compiles `source`; throws `Error` with a short reason for what it does not support. */
export function compileUriTemplate(source: string): UriTemplate {
  const variables: string[] = [];
  let pattern = "^";
  let last = 0;
  for (const m of source.matchAll(EXPRESSION)) {
    pattern += escapeRegExp(source.slice(last, m.index));
    last = m.index! + m[0].length;
    let name = m[1]!;
    const reserved = name.startsWith("+");
    if (reserved) name = name.slice(1);
    if (!NAME.test(name)) throw new Error(`unsupported expression {${m[1]}}`);
    if (variables.includes(name)) throw new Error(`variable ${name} appears twice`);
    variables.push(name);
    // Level 1 values are percent-encoded unreserved text: never a separator of the URI's parts.
    pattern += reserved ? "(.+)" : "([^/?#]+)";
  }
  const rest = source.slice(last);
  if (rest.includes("{") || rest.includes("}")) throw new Error("unbalanced braces");
  pattern += `${escapeRegExp(rest)}$`;
  const regexp = new RegExp(pattern, "s");
  return {
    source,
    variables,
    match(uri) {
      const m = regexp.exec(uri);
      if (m === null) return undefined;
      const values: Record<string, string> = {};
      variables.forEach((name, i) => {
        values[name] = m[i + 1]!;
      });
      return values;
    },
  };
}
