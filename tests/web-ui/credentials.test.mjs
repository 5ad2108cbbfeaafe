// dex-web on a server with admin credentials configured (auth.adminTokenFiles): an action that
// changes a run asks for an admin token first, refuses to send without one, shows the server's
// refusal of a wrong one (checked with AdminService.Describe before anything is sent), and with
// the right one sends the action, with the token, and keeps it for the tab.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { accessibilityViolations, eventually, payload, screenshotDir, startStack, stopStack } from "./harness.mjs";

let dex;
let browser;
let context;
let secrets;
const token = `web-ui-admin-${Date.now().toString(36)}`;

before(async () => {
  secrets = mkdtempSync(path.join(tmpdir(), "dex-web-ui-secrets-"));
  const tokenFile = path.join(secrets, "admin-token");
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  ({ dex, browser, context } = await startStack({ config: `auth:\n  adminTokenFiles: [${JSON.stringify(tokenFile)}]\n` }));
});

after(async () => {
  await stopStack({ dex, browser });
  if (secrets) rmSync(secrets, { recursive: true, force: true });
});

test("an action asks for the admin token, refuses a wrong one and sends with the right one", async () => {
  const flowId = `cred-${Date.now().toString(36)}`;
  const { runId } = await dex.call("StartFlow", {
    flowId,
    flowType: "OrderProcessing",
    input: payload({ order: flowId, amount: 10 }),
  });
  const page = await context.newPage();
  const stops = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/dex.FlowService/StopFlow"))
      stops.push({ body: r.postDataJSON(), authorization: r.headers()["authorization"] });
  });
  await page.goto(`${dex.webUrl}/flows/${flowId}/runs/${runId}`);
  await page.getByTestId("summary-status").waitFor({ timeout: 15_000 });

  await page.getByRole("button", { name: "Actions" }).click();
  await page.getByRole("menuitem", { name: "Stop the run…" }).click();
  const dialog = page.getByRole("dialog", { name: "Stop the run" });
  await dialog.waitFor({ timeout: 5_000 });
  // The menu closes with a transition: axe would see its emptied list (role "menu" without items).
  await page.getByRole("menu").waitFor({ state: "detached", timeout: 5_000 });
  const tokenBox = dialog.getByLabel("Admin token");
  await tokenBox.waitFor({ timeout: 5_000 });
  await dialog.getByRole("radio", { name: "Cancel" }).check();
  await dialog.getByLabel("Reason").fill("canceled by an admin from dex-web");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the modal asking for a token");

  // No token: nothing is sent.
  await dialog.getByRole("button", { name: "Stop the run" }).click();
  await dialog.getByText("Enter an admin token").waitFor({ timeout: 5_000 });
  assert.equal(stops.length, 0, "nothing is sent without a token");

  // A wrong token: the server's refusal, and still nothing sent.
  await tokenBox.fill("not-the-token");
  await dialog.getByRole("button", { name: "Stop the run" }).click();
  await dialog.getByText(/the admin token was not accepted/).waitFor({ timeout: 5_000 });
  assert.match(await dialog.innerText(), /UNAUTHENTICATED|credential|token/i);
  assert.equal(stops.length, 0, "nothing is sent with a refused token");
  await page.screenshot({ path: path.join(screenshotDir, "action-admin-token.png") });

  // The right token: the action goes out with it, and the tab keeps it.
  await tokenBox.fill(token);
  await dialog.getByRole("button", { name: "Stop the run" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  await eventually(async () => (await dex.call("DescribeFlow", { flowId, runId })).status === "FLOW_CANCELED", 15_000, "the run canceled");
  assert.equal(stops.length, 1);
  assert.equal(stops[0].body.runId, runId);
  assert.equal(stops[0].authorization, `Bearer ${token}`, "the action carries the admin token");
  await page.getByText("admin token set (this tab)").waitFor({ timeout: 5_000 });
  assert.ok(!(await page.content()).includes(token), "the token is never shown in the page");

  // Held now: the next action does not ask again.
  await page.getByRole("button", { name: "Actions" }).click();
  await page.getByRole("menuitem", { name: "Time travel…" }).click();
  const travel = page.getByRole("dialog", { name: "Time travel" });
  await travel.waitFor({ timeout: 5_000 });
  await page.waitForTimeout(300);
  assert.equal(await travel.getByLabel("Admin token").count(), 0, "a held token is not asked for again");
  await page.close();
});
