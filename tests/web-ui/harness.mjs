// The browser tests' harness: a real `dex-server-zd dev` (API and web listener on free loopback
// ports, a fresh data directory), the example Flows' Worker (`dex-flow-examples worker`), a
// headless Chromium (Debian's /usr/bin/chromium), and the JSON gateway for the tests' own calls.
//
// DEX_BIN_DIR: the binaries (default <repo>/build/bin). DEX_CHROMIUM: the browser (default
// /usr/bin/chromium). A missing binary or browser fails the tests; none skips.
// DEX_WEB_UI_ATTACH=<web URL>,<API address>: use a server (and Worker) you run yourself instead,
// while iterating on the app; scripts/test-web never sets it.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { createRequire } from "node:module";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../..");
export const binDir = process.env.DEX_BIN_DIR ?? path.join(repoRoot, "build/bin");
export const chromiumPath = process.env.DEX_CHROMIUM ?? "/usr/bin/chromium";
export const screenshotDir = path.join(here, "screenshots");

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function startProcess(name, bin, args, env = undefined) {
  if (!existsSync(bin)) throw new Error(`${bin} is missing: build it first (scripts/build)`);
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: env === undefined ? process.env : { ...process.env, ...env } });
  const output = [];
  const keep = (d) => {
    output.push(d.toString());
    if (output.length > 200) output.shift();
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((resolve) => {
    child.on("exit", (code, signal) => resolve({ code, signal }));
    // Not started at all (e.g. the binary is being relinked): say so in its output.
    child.on("error", (e) => {
      output.push(`${name} did not start: ${e.message}\n`);
      resolve({ code: null, signal: null, error: e });
    });
  });
  return { name, child, output, exited };
}

function hasExited(p) {
  return p.child.exitCode !== null || p.child.signalCode !== null || p.child.pid === undefined;
}

async function stopProcess(p) {
  if (hasExited(p)) return;
  p.child.kill("SIGTERM");
  // dex-server-zd drains on the first signal; a second one skips the drain.
  const first = await Promise.race([p.exited, sleep(3000).then(() => null)]);
  if (first) return;
  p.child.kill("SIGTERM");
  const second = await Promise.race([p.exited, sleep(5000).then(() => null)]);
  if (second) return;
  p.child.kill("SIGKILL");
  await p.exited;
}

/**
 * A gateway client: POST /api/v1/<service>/<method>; throws the gateway's error text. `token`:
 * sent as `Authorization: Bearer <token>` (a server with auth.tokens; docs/api.md "Access").
 */
export function gateway(webUrl, token = undefined) {
  return async function call(method, body, service = "dex.FlowService") {
    const resp = await fetch(`${webUrl}/api/v1/${service}/${method}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(token ? { Authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body ?? {}),
    });
    const text = await resp.text();
    if (!resp.ok) {
      const err = new Error(`${service}/${method}: HTTP ${resp.status}: ${text}`);
      err.status = resp.status;
      err.body = text;
      throw err;
    }
    return JSON.parse(text);
  };
}

export const payload = (value) => ({ data: Buffer.from(JSON.stringify(value)).toString("base64") });

function writeConfig(dataDir, text) {
  const file = path.join(dataDir, "dev-override.yaml");
  writeFileSync(file, text);
  return file;
}

/**
 * Starts dex-server-zd dev and the examples' Worker; answers once SearchFlows answers through the
 * gateway. `config`: the text of a YAML override file for dev's --config (e.g. auth settings).
 * With auth.tokens there: `token`, what the harness's own calls send (a client token), and
 * `workerToken`, the examples' Worker's ($DEX_TOKEN).
 */
export async function startDex({ config, token, workerToken } = {}) {
  if (process.env.DEX_WEB_UI_ATTACH) {
    const [webUrl, apiAddress] = process.env.DEX_WEB_UI_ATTACH.split(",");
    return { apiAddress, webUrl, call: gateway(webUrl), async stop() {} };
  }
  const dataDir = mkdtempSync(path.join(tmpdir(), "dex-web-ui-"));
  const apiPort = await freePort();
  const webPort = await freePort();
  const apiAddress = `127.0.0.1:${apiPort}`;
  const webUrl = `http://127.0.0.1:${webPort}`;
  const server = startProcess("dex-server-zd", path.join(binDir, "dex-server-zd"), [
    "dev",
    "--data-dir",
    dataDir,
    "--listen",
    apiAddress,
    "--web-listen",
    `127.0.0.1:${webPort}`,
    "--durability",
    "processCrashSafe",
    ...(config === undefined ? [] : ["--config", writeConfig(dataDir, config)]),
  ]);
  const call = gateway(webUrl, token);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (hasExited(server))
      throw new Error(`dex-server-zd exited (${server.child.exitCode}):\n${server.output.join("")}`);
    try {
      await call("SearchFlows", { pageSize: 1 });
      const index = await fetch(`${webUrl}/`);
      if (index.ok) break;
    } catch {
      // not ready yet
    }
    if (Date.now() > deadline) {
      await stopProcess(server);
      throw new Error(`dex-server-zd's web listener did not answer within 60 s:\n${server.output.join("")}`);
    }
    await sleep(200);
  }
  const worker = startProcess(
    "dex-flow-examples",
    path.join(binDir, "dex-flow-examples"),
    ["worker", "--server", apiAddress],
    workerToken === undefined ? undefined : { DEX_TOKEN: workerToken },
  );
  return {
    apiAddress,
    webUrl,
    call,
    server,
    worker,
    async stop() {
      await stopProcess(worker);
      await stopProcess(server);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Two `dex-server-zd serve` processes of one node on a shared filesystem object store, each with
 * its own web listener: the first holds the lease (active), the second waits (a cold standby).
 */
export async function startServeNode() {
  const dir = mkdtempSync(path.join(tmpdir(), "dex-web-ui-serve-"));
  const procs = [];
  const start = async (name) => {
    const apiAddress = `127.0.0.1:${await freePort()}`;
    const webPort = await freePort();
    const config = path.join(dir, `${name}.yaml`);
    writeFileSync(
      config,
      `nodeId: node-web\napi:\n  listen: ${apiAddress}\n` +
        `objectStore:\n  type: filesystem\n  path: ${path.join(dir, "objects")}\n  durability: processCrashSafe\n` +
        `localStore:\n  path: ${path.join(dir, `${name}-local`)}\nlease:\n  duration: 3s\n` +
        `web:\n  listen: 127.0.0.1:${webPort}\n`,
    );
    const p = startProcess(`serve ${name}`, path.join(binDir, "dex-server-zd"), ["serve", "--config", config]);
    procs.push(p);
    return { ...p, apiAddress, webUrl: `http://127.0.0.1:${webPort}`, call: gateway(`http://127.0.0.1:${webPort}`) };
  };
  const stop = async () => {
    for (const p of procs.reverse()) await stopProcess(p);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const active = await start("a");
    const alive = (p) => {
      if (hasExited(p))
        throw Object.assign(new Error(`${p.name} exited (${p.child.exitCode}):\n${p.output.join("")}`), { fatal: true });
    };
    await eventually(
      () => (alive(active), active.call("SearchFlows", { pageSize: 1 }).then(() => true)),
      60_000,
      "the active process to serve",
    );
    const standby = await start("b");
    // The standby's web listener answers, and its FlowService says UNAVAILABLE.
    await eventually(
      () => (alive(standby), standby.call("SearchFlows", { pageSize: 1 }).then(() => false, (e) => e.status === 503)),
      60_000,
      "the standby's gateway to answer 503",
    );
    return { active, standby, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Headless Chromium at a laptop's size. A missing browser fails: it is never skipped. */
export async function launchBrowser() {
  if (!existsSync(chromiumPath))
    throw new Error(`Chromium is missing at ${chromiumPath}: run scripts/install-deps (Debian package chromium)`);
  mkdirSync(screenshotDir, { recursive: true });
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  return { browser, context };
}

export async function screenshot(page, name) {
  await page.evaluate(() => window.scrollTo(0, 0)); // the fixed header stays on top of a full-page shot
  await page.screenshot({ path: path.join(screenshotDir, `${name}.png`), fullPage: true });
}

/** A test file's stack: dev and the Worker (startDex's options), and a browser. */
export async function startStack(options) {
  const dex = await startDex(options);
  const { browser, context } = await launchBrowser();
  return { dex, browser, context };
}

/** Stops what startStack started (any part may be missing after a failed start). */
export async function stopStack({ dex, browser } = {}) {
  await browser?.close();
  await dex?.stop();
}

/** Polls until fn() is truthy (or throws after timeoutMs). */
export async function eventually(fn, timeoutMs = 20_000, what = "the condition") {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      if (e.fatal) throw e; // no use waiting
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
    await sleep(100);
  }
}

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

/**
 * axe-core's WCAG 2 A and AA checks on the page as it is: the violations of impact serious or
 * critical, as "rule: target" lines (empty: none).
 */
export async function accessibilityViolations(page) {
  await page.addScriptTag({ path: axePath });
  const result = await page.evaluate(async () =>
    // eslint-disable-next-line no-undef
    axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa"] } }),
  );
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) => v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(" ")}: ${v.help}`));
}
