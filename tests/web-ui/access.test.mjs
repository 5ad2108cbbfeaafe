// dex-web on a server with a token per role (auth.tokens; docs/api.md "Access", docs/dex-web.md
// "Credential"): without a token the Run view shows the API's UNAUTHENTICATED; a viewer token
// typed in the header's box lets it read the run; an action with the viewer token is refused by
// the server (PERMISSION_DENIED, holds viewer) and changes nothing; the token never shows in the
// page.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { payload, startStack, stopStack } from "./harness.mjs";

let dex;
let browser;
let context;
let secrets;
const stamp = Date.now().toString(36);
const tokens = { viewer: `web-viewer-${stamp}`, client: `web-client-${stamp}`, worker: `web-worker-${stamp}` };

before(async () => {
  secrets = mkdtempSync(path.join(tmpdir(), "dex-web-ui-access-"));
  const lines = ["auth:", "  tokens:"];
  for (const [role, token] of Object.entries(tokens)) {
    const file = path.join(secrets, role);
    writeFileSync(file, `${token}\n`, { mode: 0o600 });
    lines.push(`    ${role}:`, `      files: [${JSON.stringify(file)}]`);
  }
  ({ dex, browser, context } = await startStack({
    config: `${lines.join("\n")}\n`,
    token: tokens.client,
    workerToken: tokens.worker,
  }));
});

after(async () => {
  await stopStack({ dex, browser });
  if (secrets) rmSync(secrets, { recursive: true, force: true });
});

test("a viewer token reads a run and its actions are refused by the server", async () => {
  const flowId = `access-${stamp}`;
  const { runId } = await dex.call("StartFlow", {
    flowId,
    flowType: "OrderProcessing",
    input: payload({ order: flowId, amount: 10 }),
  });
  const page = await context.newPage();
  const stops = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith("/dex.FlowService/StopFlow"))
      stops.push({ authorization: r.headers()["authorization"] });
  });
  await page.goto(`${dex.webUrl}/flows/${flowId}/runs/${runId}`);
  await page.getByText(/UNAUTHENTICATED/).first().waitFor({ timeout: 15_000 });

  // The header's box: the viewer's token, kept for the tab; the run reads.
  await page.getByLabel("Admin token").first().fill(tokens.viewer);
  await page.getByRole("button", { name: "Use" }).click();
  await page.reload();
  await page.getByTestId("summary-status").waitFor({ timeout: 15_000 });

  // An action goes out with the viewer's token and is refused; the run is unchanged.
  await page.getByRole("button", { name: "Actions" }).click();
  await page.getByRole("menuitem", { name: "Stop the run…" }).click();
  const dialog = page.getByRole("dialog", { name: "Stop the run" });
  await dialog.waitFor({ timeout: 5_000 });
  await dialog.getByRole("radio", { name: "Cancel" }).check();
  await dialog.getByLabel("Reason").fill("a viewer tries");
  await dialog.getByRole("button", { name: "Stop the run" }).click();
  await dialog.getByText(/PERMISSION_DENIED/).waitFor({ timeout: 10_000 });
  assert.match(await dialog.innerText(), /holds viewer/);
  assert.equal(stops.length, 1);
  assert.equal(stops[0].authorization, `Bearer ${tokens.viewer}`);
  const described = await dex.call("DescribeFlow", { flowId, runId });
  assert.notEqual(described.status, "FLOW_CANCELED");
  for (const token of Object.values(tokens)) {
    assert.ok(!(await page.content()).includes(token), "a token is shown in the page");
  }
  await page.close();
});
