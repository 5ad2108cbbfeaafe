// dex-web on a standby: two `dex-server-zd serve` processes of one node (harness.mjs,
// startServeNode), and a third one in hot mode that follows the log. A standby's own dex-web says
// plainly that this process is not serving, with what it says about itself (GET /api/v1/process: its
// role, the active process and epoch it last saw), on the Search and the Node views; the active
// process's Node view shows its log head.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  accessibilityViolations,
  binDir,
  eventually,
  freePort,
  launchBrowser,
  screenshot,
  startServeNode,
} from "./harness.mjs";

let node;
let hot;
let browser;
let context;

async function processStatus(webUrl) {
  const resp = await fetch(`${webUrl}/api/v1/process`);
  assert.equal(resp.status, 200);
  return resp.json();
}

/**
 * A third process of the node in hot mode: the cold standby's config (the same node and object
 * store) with its own ports and local store, and `standby.mode: hot`. Answers once it follows.
 */
async function startHotStandby(standby) {
  const config = standby.child.spawnargs[standby.child.spawnargs.indexOf("--config") + 1];
  const dir = path.dirname(config);
  const apiAddress = `127.0.0.1:${await freePort()}`;
  const webPort = await freePort();
  const text = readFileSync(config, "utf8")
    .replace(/listen: 127\.0\.0\.1:\d+\nobjectStore/, `listen: ${apiAddress}\nobjectStore`)
    .replace(/web:\n {2}listen: 127\.0\.0\.1:\d+\n/, `web:\n  listen: 127.0.0.1:${webPort}\n`)
    .replace(/localStore:\n {2}path: .*\n/, `localStore:\n  path: ${path.join(dir, "c-local")}\n`);
  const hotConfig = path.join(dir, "c.yaml");
  writeFileSync(hotConfig, `${text}standby:\n  mode: hot\n`);
  const child = spawn(path.join(binDir, "dex-server-zd"), ["serve", "--config", hotConfig], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = [];
  child.stdout.on("data", (d) => output.push(d.toString()));
  child.stderr.on("data", (d) => output.push(d.toString()));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const webUrl = `http://127.0.0.1:${webPort}`;
  const p = {
    webUrl,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const done = await Promise.race([exited.then(() => true), new Promise((r) => setTimeout(r, 5000))]);
      if (!done) {
        child.kill("SIGKILL");
        await exited;
      }
    },
  };
  try {
    await eventually(
      async () => {
        if (child.exitCode !== null)
          throw Object.assign(new Error(`the hot standby exited:\n${output.join("")}`), { fatal: true });
        return (await processStatus(webUrl)).standbyState === "following";
      },
      60_000,
      "the hot standby to follow the log",
    );
  } catch (e) {
    await p.stop();
    throw e;
  }
  return p;
}

before(async () => {
  node = await startServeNode();
  ({ browser, context } = await launchBrowser());
});

after(async () => {
  await browser?.close();
  await hot?.stop();
  await node?.stop();
});

test("a standby's Search view shows the standby banner with its role and the active process", async (t) => {
  try {
    await node.standby.call("Describe", {}, "dex.AdminService");
    assert.fail("the standby's Describe answered");
  } catch (e) {
    assert.equal(e.status, 503);
    assert.match(JSON.parse(e.body).message, /standby/);
  }
  const described = await node.active.call("Describe", {}, "dex.AdminService");
  const me = await processStatus(node.standby.webUrl);
  const page = await context.newPage();
  const t0 = Date.now();
  await page.goto(`${node.standby.webUrl}/`);
  const banner = page.getByTestId("standby-banner");
  const process = banner.getByTestId("standby-banner-process");
  await process.waitFor({ timeout: 15_000 });
  t.diagnostic(`standby search page: ${Date.now() - t0} ms to the banner`);
  assert.match(await banner.innerText(), /This process is not serving \(cold standby\)/);
  assert.equal(
    await process.innerText(),
    `This process (${me.processId}) is a cold standby of node node-web. The active process: ` +
      `${described.holderProcessId} at node epoch ${described.nodeEpoch}.`,
  );
  assert.equal(await banner.getAttribute("role"), "alert");
  await banner.getByRole("link", { name: "Node view" }).click();
  await page.getByTestId("not-serving").waitFor({ timeout: 15_000 });
  await page.close();
});

test("a standby's Node view says it does not serve and who does; the active one's shows its log head", async () => {
  const described = await node.active.call("Describe", {}, "dex.AdminService");
  const page = await context.newPage();
  await page.goto(`${node.standby.webUrl}/node`);
  await page.getByTestId("role-badge").filter({ hasText: "cold standby: not serving" }).waitFor({ timeout: 15_000 });
  const notServing = page.getByTestId("not-serving");
  assert.match(await notServing.innerText(), /This process is not serving: it is a cold standby/);
  assert.equal(
    await page.getByTestId("not-serving-holder").innerText(),
    `${described.holderProcessId} at node epoch ${described.nodeEpoch}`,
  );
  assert.match(await page.getByTestId("not-serving-reason").innerText(), /cold standby of node node-web/);
  assert.equal(await page.getByTestId("process-role").innerText(), "cold standby");
  assert.equal(await page.getByTestId("process-phase").innerText(), "acquiring");
  assert.equal(await page.getByTestId("process-epoch").innerText(), described.nodeEpoch);
  assert.equal(await page.getByTestId("process-holder").innerText(), described.holderProcessId);
  assert.equal(await page.getByTestId("process-standby-state").innerText(), "cold: waits idle");
  // No second banner: the page itself says it; Describe's own answer is plain text.
  assert.equal(await page.getByTestId("standby-banner").count(), 0);
  await page.getByTestId("describe-unavailable").waitFor();
  assert.match(await page.getByTestId("describe-unavailable").innerText(), /UNAVAILABLE: .*cold standby/);
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the cold standby's node page");

  await page.goto(`${node.active.webUrl}/node`);
  await page.getByTestId("role-badge").filter({ hasText: "active: serving" }).waitFor({ timeout: 15_000 });
  await page.getByTestId("node-id").waitFor();
  assert.equal(await page.getByTestId("node-id").innerText(), "node-web");
  assert.equal(await page.getByTestId("node-epoch").innerText(), described.nodeEpoch);
  assert.equal(await page.getByTestId("process-role").innerText(), "active");
  assert.equal(await page.getByTestId("process-epoch").innerText(), described.nodeEpoch);
  assert.equal(
    await page.getByTestId("process-holder").innerText(),
    `${described.holderProcessId} (this process)`,
  );
  const active = await processStatus(node.active.webUrl);
  assert.notEqual(active.logHead, null);
  const shown = await page.getByTestId("process-log-head").innerText();
  assert.match(shown, /^\d+$/);
  assert.ok(BigInt(shown) <= BigInt(active.logHead), `log head ${shown} > ${active.logHead}`);
  assert.equal(await page.getByTestId("not-serving").count(), 0);
  await page.close();
});

test("a hot standby's Node view shows its follower's state, lag and applied slot", async () => {
  hot = await startHotStandby(node.standby);
  const described = await node.active.call("Describe", {}, "dex.AdminService");
  const page = await context.newPage();
  await page.goto(`${hot.webUrl}/node`);
  await page.getByTestId("role-badge").filter({ hasText: "hot standby: not serving" }).waitFor({ timeout: 15_000 });
  assert.equal(await page.getByTestId("process-role").innerText(), "hot standby");
  assert.equal(await page.getByTestId("process-standby-state").innerText(), "following (hot)");
  assert.match(await page.getByTestId("process-lag").innerText(), /^\d+\.\d\d s$/);
  assert.match(await page.getByTestId("process-applied-slot").innerText(), /^\d+$/);
  assert.equal(
    await page.getByTestId("not-serving-holder").innerText(),
    `${described.holderProcessId} at node epoch ${described.nodeEpoch}`,
  );
  await screenshot(page, "node-standby");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of node-standby");
  await page.close();
});
