#!/usr/bin/env bash
# Prints the path of the MCP conformance tool's entry point (`dist/index.js`), installing it into
# .cache/conformance first when needed. The tool needs Node 22, so it is not a devDependency (that
# made `npm ci` warn EBADENGINE on Node 20): it is installed here with npm running under the Node 22
# of scripts/node22.sh, from scripts/conformance/package-lock.json (the version and every
# dependency pinned), and run under that Node 22 by the tests. Usage:
#   "$(bash scripts/node22.sh)" "$(bash scripts/conformance-tool.sh)" list
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
pinned="$root/scripts/conformance"
cache="$root/.cache/conformance"
entry="$cache/node_modules/@modelcontextprotocol/conformance/dist/index.js"
# Test files run in parallel and each may ask at once: one install at a time, the others wait.
mkdir -p "$root/.cache"
exec 9>"$root/.cache/conformance.lock"
flock 9
# Reinstall whenever the pinned lockfile changed since the last install (a version bump).
if [ ! -f "$entry" ] || ! cmp -s "$pinned/package-lock.json" "$cache/package-lock.json"; then
  node22="$(bash "$root/scripts/node22.sh")"
  # The npm that came with the machine's node, run by Node 22 so engine checks see Node 22.
  npm_cli="$(readlink -f "$(command -v npm)")"
  case "$npm_cli" in *.js) ;; *) npm_cli="$(dirname "$npm_cli")/../lib/node_modules/npm/bin/npm-cli.js" ;; esac
  rm -rf "$cache"
  mkdir -p "$cache"
  cp "$pinned/package.json" "$pinned/package-lock.json" "$cache/"
  (cd "$cache" && "$node22" "$npm_cli" ci --no-audit --no-fund --loglevel=error >&2)
fi
[ -f "$entry" ] || { echo "conformance-tool.sh: $entry missing after install" >&2; exit 1; }
echo "$entry"
