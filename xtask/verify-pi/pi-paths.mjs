// Runs Pi 0.85.1's own path functions for `cargo xtask verify-pi`, which compares every answer
// with the Rust port in harness-gate. Node 24 runs it; Pi's files are imported from the
// installed package, never copied.
//
//   node pi-paths.mjs cases PI_PACKAGE_DIR CASES_JSON   -> one JSON answer per case, as an array
//   node pi-paths.mjs nfd                                -> every scalar whose NFD differs, one line
//                                                          each: "CP:HEX HEX ..." (hex code points)
//   node pi-paths.mjs trim                               -> every scalar String.prototype.trim
//                                                          removes, one hex code point a line
//
// Besides Pi's functions, `cases` runs Node's own `path.posix.normalize` and `path.posix.dirname`,
// which the gate copies for Claude Code's path expansion and Glob base.
import { readFileSync } from "node:fs";
import { join, posix } from "node:path";
import { pathToFileURL } from "node:url";

function errorCode(error) {
  return error?.code ?? error?.name ?? String(error);
}

async function cases(piDir, casesFile) {
  const paths = await import(pathToFileURL(join(piDir, "dist/utils/paths.js")).href);
  const pathUtils = await import(pathToFileURL(join(piDir, "dist/core/tools/path-utils.js")).href);
  const run = {
    normalize: (c) => paths.normalizePath(c.input),
    normalizeTool: (c) =>
      paths.normalizePath(c.input, { normalizeUnicodeSpaces: true, stripAtPrefix: true }),
    resolveToCwd: (c) => pathUtils.resolveToCwd(c.input, c.cwd),
    resolveReadPath: (c) => pathUtils.resolveReadPathAsync(c.input, c.cwd),
    pathNormalize: (c) => posix.normalize(c.input),
    pathDirname: (c) => posix.dirname(c.input),
  };
  const answers = [];
  for (const c of JSON.parse(readFileSync(casesFile, "utf8"))) {
    try {
      answers.push({ ok: await run[c.fn](c) });
    } catch (error) {
      answers.push({ error: errorCode(error) });
    }
  }
  process.stdout.write(JSON.stringify(answers));
}

function nfd() {
  const lines = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const text = String.fromCodePoint(cp);
    const decomposed = text.normalize("NFD");
    if (decomposed !== text) {
      const parts = Array.from(decomposed, (c) => c.codePointAt(0).toString(16).toUpperCase());
      lines.push(`${cp.toString(16).toUpperCase()}:${parts.join(" ")}`);
    }
  }
  process.stdout.write(lines.join("\n") + "\n");
}

function trim() {
  const lines = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    if (String.fromCodePoint(cp).trim() === "") lines.push(cp.toString(16).toUpperCase());
  }
  process.stdout.write(lines.join("\n") + "\n");
}

const [mode, ...args] = process.argv.slice(2);
if (mode === "cases") await cases(args[0], args[1]);
else if (mode === "nfd") nfd();
else if (mode === "trim") trim();
else {
  process.stderr.write("usage: pi-paths.mjs (cases PI_DIR CASES_JSON | nfd | trim)\n");
  process.exit(2);
}
