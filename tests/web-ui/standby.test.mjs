// dex-web on a standby: two `dex-server-zd serve` processes of one node (harness.mjs,
// startServeNode). The standby's own dex-web says plainly that this process is not serving, with
// what AdminService.Describe answers, on the Search and the Node views.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { accessibilityViolations, launchBrowser, screenshot, startServeNode } from "./harness.mjs";

let node;
let browser;
let context;

before(async () => {
  node = await startServeNode();
  ({ browser, context } = await launchBrowser());
});

after(async () => {
  await browser?.close();
  await node?.stop();
});

test("a standby's Search view shows the standby banner with the server's words", async (t) => {
  let expected;
  try {
    await node.standby.call("Describe", {}, "dex.AdminService");
    assert.fail("the standby's Describe answered");
  } catch (e) {
    assert.equal(e.status, 503);
    expected = JSON.parse(e.body).message;
  }
  assert.match(expected, /standby/);
  const page = await context.newPage();
  const t0 = Date.now();
  await page.goto(`${node.standby.webUrl}/`);
  const banner = page.getByTestId("standby-banner");
  await banner.getByText(`AdminService.Describe: ${expected}`).waitFor({ timeout: 15_000 });
  t.diagnostic(`standby search page: ${Date.now() - t0} ms to the banner`);
  assert.match(await banner.innerText(), /This process is not serving \(standby\)/);
  assert.equal(await banner.getAttribute("role"), "alert");
  await page.close();
});

test("a standby's Node view says it does not serve; the active one's says it does", async () => {
  const page = await context.newPage();
  await page.goto(`${node.standby.webUrl}/node`);
  await page.getByTestId("role-badge").filter({ hasText: "not serving (standby)" }).waitFor({ timeout: 15_000 });
  await page.getByTestId("standby-banner").waitFor();
  assert.equal(await page.getByTestId("standby-banner").count(), 1);
  assert.match(await page.getByTestId("describe-unavailable").innerText(), /cold standby of node node-web/);
  await screenshot(page, "node-standby");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of node-standby");
  await page.goto(`${node.active.webUrl}/node`);
  await page.getByTestId("role-badge").filter({ hasText: "active: serving" }).waitFor({ timeout: 15_000 });
  const described = await node.active.call("Describe", {}, "dex.AdminService");
  assert.equal(await page.getByTestId("node-id").innerText(), "node-web");
  assert.equal(await page.getByTestId("node-epoch").innerText(), described.nodeEpoch);
  await page.close();
});
