#!/usr/bin/env node
// The TypeScript SDK on its own, as an application gets it (scripts/test-typescript
// runs this after the unit tests; `npm run test:pack` by hand):
//  1. `npm pack` (its prepack builds) makes a tarball that holds the compiled
//     code and the API definition (proto/dex/*.proto) it loads;
//  2. a copy of the package's sources outside the repository, with that
//     definition inside, builds; without it the build fails saying why;
//  3. an application in a temporary directory outside the repository depends
//     on the tarball by path, `npm install`s it (packages already in npm's
//     cache are reused) and runs app/check.cjs: a `dex-server-zd dev`, a Worker
//     with a one-Step Flow and a Client that starts it and waits for its
//     output; and app/check-esm.mjs, the package as an ES module.
// Any missing piece fails it (exit 1); nothing is skipped. Needs the server
// binary from scripts/build (DEX_BIN_DIR overrides build/bin). About 20-30 s.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const packageDir = path.resolve(here, "..");
const repoRoot = path.resolve(packageDir, "..", "..");
const binDir = path.resolve(process.env.DEX_BIN_DIR ?? path.join(repoRoot, "build", "bin"));
const serverBinary = path.join(binDir, "dex-server-zd");
const started = Date.now();

function fail(message) {
  console.error(`test-pack: FAIL: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

function step(what) {
  console.log(`test-pack: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

/** Runs a command to its end (bounded); fails with its output unless it exits 0, or returns its stdout. */
function run(command, args, { cwd, timeoutMs = 120_000, env = process.env, expectFailure = false }) {
  const result = spawnSync(command, args, { cwd, env, encoding: "utf8", timeout: timeoutMs, killSignal: "SIGKILL" });
  const shown = `${command} ${args.join(" ")} (in ${cwd})`;
  const output = `--- stdout\n${result.stdout ?? ""}\n--- stderr\n${result.stderr ?? ""}`;
  if (result.error !== undefined) fail(`${shown}: ${result.error.message}\n${output}`);
  if (expectFailure) {
    if (result.status === 0) fail(`${shown} succeeded, though it should have failed\n${output}`);
    return `${result.stdout}${result.stderr}`;
  }
  if (result.status !== 0) fail(`${shown} exited with ${result.status ?? result.signal}\n${output}`);
  return result.stdout;
}

if (!fs.existsSync(serverBinary)) {
  console.error(`test-pack: FAIL: ${serverBinary} is missing: run scripts/build first, or set DEX_BIN_DIR`);
  process.exit(1);
}
// The temporary directory must be outside the repository, or the package
// could find the repository's proto/ (or packages) by walking up.
const tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "dex-sdk-pack-")));
if (!path.relative(repoRoot, tmp).startsWith("..")) {
  console.error(`test-pack: FAIL: the temporary directory ${tmp} is inside the repository ${repoRoot} (set TMPDIR)`);
  fs.rmSync(tmp, { recursive: true, force: true });
  process.exit(1);
}
// The children see no DEX_PROTO_DIR: the package has to find its own copy.
const env = { ...process.env };
delete env.DEX_PROTO_DIR;

try {
  // 1. The tarball.
  step("npm pack");
  const tarballs = path.join(tmp, "tarballs");
  fs.mkdirSync(tarballs);
  const packed = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", tarballs], { cwd: packageDir, env }));
  const tarball = path.join(tarballs, packed[0].filename);
  const files = new Set(packed[0].files.map((f) => f.path));
  const protoDir = path.join(repoRoot, "proto", "dex");
  const wanted = ["dist/index.js", "dist/index.d.ts", "dist/proto.js", "package.json"];
  for (const name of fs.readdirSync(protoDir).filter((n) => n.endsWith(".proto"))) wanted.push(`proto/dex/${name}`);
  for (const name of wanted) if (!files.has(name)) fail(`the tarball ${tarball} has no ${name}`);
  for (const name of files) {
    if (/^(src|test|test-pack|dist-test|node_modules|dist\/proto)\//.test(name)) fail(`the tarball ships ${name}`);
  }
  // Its protos are the repository's.
  for (const name of wanted.filter((n) => n.startsWith("proto/"))) {
    const inPackage = fs.readFileSync(path.join(packageDir, name));
    if (!inPackage.equals(fs.readFileSync(path.join(repoRoot, name)))) fail(`the package's ${name} differs from the repository's`);
  }

  // 2. A copy of the sources outside the repository builds with the protos
  // inside it, and fails saying why without them.
  step("a copy outside the repository builds");
  const copy = path.join(tmp, "copy");
  for (const name of ["package.json", "package-lock.json", "tsconfig.json", "src", "scripts", "proto"]) {
    fs.cpSync(path.join(packageDir, name), path.join(copy, name), { recursive: true });
  }
  fs.symlinkSync(path.join(packageDir, "node_modules"), path.join(copy, "node_modules"), "dir");
  run("npm", ["run", "build"], { cwd: copy, env });
  for (const name of ["dist/index.js", "proto/dex/api.proto"]) {
    if (!fs.existsSync(path.join(copy, name))) fail(`the copy's build made no ${name}`);
  }
  fs.rmSync(path.join(copy, "proto"), { recursive: true });
  const said = run("node", ["scripts/copy-protos.js"], { cwd: copy, env, expectFailure: true });
  if (!/copy-protos: the API definition \(dex\/api\.proto\) is neither in the repository/.test(said)) {
    fail(`copy-protos without any protos said:\n${said}`);
  }

  // 3. An application that installs the tarball and runs a Flow.
  step("npm install of the tarball in an application outside the repository");
  const app = path.join(tmp, "app");
  fs.mkdirSync(app);
  for (const name of ["check.cjs", "check-esm.mjs"]) fs.copyFileSync(path.join(here, "app", name), path.join(app, name));
  fs.writeFileSync(
    path.join(app, "package.json"),
    `${JSON.stringify({ name: "dex-sdk-pack-check", version: "1.0.0", private: true, dependencies: { "dex-sdk": `file:${tarball}` } }, null, 2)}\n`,
  );
  run("npm", ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: app, env });
  if (fs.lstatSync(path.join(app, "node_modules", "dex-sdk")).isSymbolicLink()) fail("dex-sdk was linked, not installed from the tarball");

  step("the application runs a Flow");
  const dataDir = path.join(tmp, "data");
  process.stdout.write(run("node", ["check.cjs", serverBinary, dataDir], { cwd: app, env, timeoutMs: 60_000 }));
  process.stdout.write(run("node", ["check-esm.mjs"], { cwd: app, env, timeoutMs: 30_000 }));
  step("passed");
} catch (error) {
  if (process.exitCode !== 1) console.error(`test-pack: FAIL: ${error instanceof Error ? error.stack : error}`);
  process.exitCode = 1;
} finally {
  if (process.env.DEX_KEEP_PACK_TMP) console.log(`test-pack: kept ${tmp}`);
  else fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 3 });
}
