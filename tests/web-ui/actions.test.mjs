// dex-web's actions on the Run view, in a real browser against a real dex-server-zd dev and the
// example Flows' Worker (harness.mjs): each action is a modal sent by its button; publishing to a
// Channel moves a waiting Step on, a Timer is skipped, an RPC answers its output, an Attribute is
// set (a send whose answer was lost is sent again with the same request ID), a run is terminated
// with a reason, a time travel shows its dry run and then moves to the new run, and refused
// actions show the server's code and message. The modals are saved to screenshots/.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { accessibilityViolations, eventually, payload, screenshotDir, startStack, stopStack } from "./harness.mjs";

let dex;
let browser;
let context;
const suffix = `${Date.now().toString(36)}`;
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

before(async () => {
  ({ dex, browser, context } = await startStack());
});

after(async () => {
  await stopStack({ dex, browser });
});

/** An OrderProcessing run whose Ship Step waits (AnyOf the seller's approval, a reminder Timer a day away). */
async function waitingOrder(name) {
  const flowId = `act-${name}-${suffix}`;
  const { runId } = await dex.call("StartFlow", {
    flowId,
    flowType: "OrderProcessing",
    input: payload({ order: flowId, amount: 10 }),
    options: { initialAttributes: [{ key: "customer", value: { stringValue: "acme" } }] },
  });
  await eventually(async () => {
    const s = await dex.call("GetFlowState", { flowId, runId });
    return s.active.some((e) => e.stepType === "Ship" && e.phase === "PHASE_WAITING");
  }, 30_000, `${flowId}'s Ship Step to wait`);
  return { flowId, runId };
}

/** Opens the run's page once its waiting Ship Step shows. */
async function openRun({ flowId, runId }) {
  const page = await context.newPage();
  await page.goto(`${dex.webUrl}/flows/${flowId}/runs/${runId}`);
  await page
    .getByTestId("active-steps")
    .getByTestId("step-row")
    .filter({ hasText: "Ship" })
    .filter({ hasText: "WAITING" })
    .first()
    .waitFor({ timeout: 15_000 });
  return page;
}

/** Opens an action's modal from the Actions menu; answers the dialog. */
async function openAction(page, item, title) {
  await page.getByRole("button", { name: "Actions" }).click();
  await page.getByRole("menuitem", { name: item }).click();
  const dialog = page.getByRole("dialog", { name: title });
  await dialog.waitFor({ timeout: 5_000 });
  // The menu closes with a short transition; an accessibility scan in it saw a menu without its
  // items (seen once).
  await page.getByRole("menu").waitFor({ state: "hidden", timeout: 5_000 });
  return dialog;
}

/** The API calls of a method the page sends, as their JSON bodies. */
function recordCalls(page, method) {
  const bodies = [];
  page.on("request", (r) => {
    if (r.method() === "POST" && r.url().endsWith(`/dex.FlowService/${method}`)) bodies.push(r.postDataJSON());
  });
  return bodies;
}

/** The viewport as it is, with the modal over the page (a full-page shot would cut its overlay). */
const screenshot = (page, name) => page.screenshot({ path: path.join(screenshotDir, `${name}.png`) });

const valueBox = (dialog) => dialog.getByRole("textbox", { name: "Value", exact: true });

async function serverError(method, body) {
  try {
    await dex.call(method, body);
  } catch (e) {
    return JSON.parse(e.body);
  }
  assert.fail(`the server took ${method} ${JSON.stringify(body)}`);
}

test("publishing to a Channel from the UI moves the waiting Step on", async (t) => {
  const run = await waitingOrder("publish");
  const page = await openRun(run);
  const sent = recordCalls(page, "PublishToChannel");
  // The keyboard alone: the menu opens with Enter, the modal takes the focus, Escape closes it and
  // the focus goes back to the menu's button.
  await page.getByRole("button", { name: "Actions" }).focus();
  await page.keyboard.press("Enter");
  await page.getByRole("menuitem", { name: "Publish to a Channel…" }).waitFor();
  // The arrow keys move through the items.
  const focused = () => page.evaluate(() => document.activeElement?.textContent ?? "");
  for (let i = 0; i < 8 && (await focused()) !== "Publish to a Channel…"; i++) await page.keyboard.press("ArrowDown");
  assert.equal(await focused(), "Publish to a Channel…");
  await page.keyboard.press("Enter");
  let dialog = page.getByRole("dialog", { name: "Publish to a Channel" });
  await dialog.waitFor();
  await eventually(() => dialog.evaluate((d) => d.contains(document.activeElement)), 5_000, "the focus in the modal");
  // Escape closes the Channel's suggestions first, then the modal.
  for (let i = 0; i < 3 && (await dialog.isVisible()); i++) {
    await page.keyboard.press("Escape");
    await page.waitForTimeout(200);
  }
  await dialog.waitFor({ state: "hidden" });
  await eventually(
    () => page.evaluate(() => document.activeElement?.textContent === "Actions"),
    5_000,
    "the focus back on the Actions button",
  );
  assert.equal(sent.length, 0, "nothing is sent before the modal's button");

  dialog = await openAction(page, "Publish to a Channel…", "Publish to a Channel");
  // The one Channel the run waits on is offered, already chosen.
  assert.equal(await dialog.getByLabel(/^Channel/).inputValue(), "seller-approval");
  await dialog.getByLabel("Message 1 (JSON)").fill('{"seller": "s-42"}');
  await screenshot(page, "action-publish");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the publish modal");
  const t0 = Date.now();
  await dialog.getByRole("button", { name: "Publish" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  await page.getByTestId("action-done").filter({ hasText: "Published 1 message to seller-approval." }).waitFor();
  // The history shows the publish, then Ship goes on and completes the order.
  await page.locator('[data-kind="CHANNEL_PUBLISHED"]').waitFor({ timeout: 10_000 });
  await page.locator('[data-kind="FLOW_CLOSED"]').waitFor({ timeout: 15_000 });
  await eventually(async () => (await page.getByTestId("summary-status").innerText()) === "COMPLETED", 10_000, "COMPLETED");
  t.diagnostic(`publish: ${Date.now() - t0} ms from the click to the order's close`);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].runId, run.runId);
  assert.equal(sent[0].channel, "seller-approval");
  assert.match(sent[0].requestId, uuid);
  assert.deepEqual(JSON.parse(Buffer.from(sent[0].messages[0].data, "base64").toString()), { seller: "s-42" });
  const desc = await dex.call("DescribeFlow", run);
  const result = JSON.parse(Buffer.from(desc.outputs[0].output.data, "base64").toString());
  assert.deepEqual(result.approved_by, { seller: "s-42" });
  // A closed run: only time travel is offered.
  await page.getByRole("button", { name: "Actions" }).click();
  assert.ok(await page.getByRole("menuitem", { name: "Publish to a Channel…" }).isDisabled());
  assert.ok(await page.getByRole("menuitem", { name: "Time travel…" }).isEnabled());
  await page.keyboard.press("Escape");
  await page.close();
});

test("skipping a waiting Step's Timer fires it now", async () => {
  const run = await waitingOrder("skip");
  const page = await openRun(run);
  const sent = recordCalls(page, "SkipTimer");
  const dialog = await openAction(page, "Skip a Timer…", "Skip a Timer");
  // Ship-1 waits AnyOf(the Channel, the Timer): the Timer is condition 1.
  const timer = dialog.getByRole("radio", { name: /^Ship-1, condition 1: Timer at/ });
  assert.ok(await timer.isChecked());
  assert.ok(await dialog.getByRole("radio", { name: "The run's flow timeout" }).isVisible());
  await screenshot(page, "action-skip-timer");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the skip-timer modal");
  await dialog.getByRole("button", { name: "Skip the Timer" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  await page.locator('[data-kind="TIMER_SKIPPED"]').waitFor({ timeout: 10_000 });
  // The Timer fired: Ship reminds the seller and waits again, as Ship-2.
  await page
    .getByTestId("active-steps")
    .getByTestId("step-row")
    .filter({ hasText: "Ship-2" })
    .filter({ hasText: "WAITING" })
    .waitFor({ timeout: 15_000 });
  assert.deepEqual(
    { ...sent[0], requestId: undefined },
    { flow: run, stepExecutionId: "Ship-1", conditionIndex: 1, requestId: undefined },
  );
  assert.match(sent[0].requestId, uuid);
  // The run has no flow timeout: the server says so, in its own words.
  const expected = await serverError("SkipTimer", { flow: run, runTimer: "RUN_TIMER_FLOW_TIMEOUT" });
  const again = await openAction(page, "Skip a Timer…", "Skip a Timer");
  await again.getByRole("radio", { name: "The run's flow timeout" }).check();
  await again.getByRole("button", { name: "Skip the Timer" }).click();
  await again.getByTestId("error-message").waitFor({ timeout: 10_000 });
  assert.equal(await again.getByTestId("error-message").innerText(), expected.message);
  assert.match(await again.getByTestId("error-alert").innerText(), new RegExp(expected.code));
  await page.close();
});

test("an RPC answers its output", async () => {
  const run = await waitingOrder("rpc");
  const page = await openRun(run);
  const sent = recordCalls(page, "InvokeRpc");
  const dialog = await openAction(page, "Invoke an RPC…", "Invoke an RPC");
  await dialog.getByLabel(/^RPC name/).fill("describe");
  await dialog.getByLabel("Lock keys").fill("order-a, order-b");
  await dialog.getByRole("button", { name: "Invoke" }).click();
  const output = dialog.getByTestId("rpc-output");
  await output.waitFor({ timeout: 15_000 });
  assert.match(await output.innerText(), /"status": "awaiting-approval"/);
  await screenshot(page, "action-rpc");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the RPC modal");
  assert.deepEqual(sent[0].lockKeys, ["order-a", "order-b"]);
  assert.equal(Buffer.from(sent[0].input.data, "base64").toString(), "{}");
  // An RPC whose handler refuses its input: FAILED_PRECONDITION with the Worker's message.
  await dialog.getByLabel(/^RPC name/).fill("approve");
  await dialog.getByLabel("Input (JSON)").fill('{"seller": 7}');
  await dialog.getByRole("button", { name: "Invoke again" }).click();
  await dialog.getByTestId("error-message").waitFor({ timeout: 15_000 });
  assert.match(await dialog.getByTestId("error-alert").innerText(), /FAILED_PRECONDITION/);
  assert.match(await dialog.getByTestId("error-message").innerText(), /approve takes \{"seller": "<id>"\}/);
  // Input that is not JSON is not sent.
  await dialog.getByLabel("Input (JSON)").fill("{seller");
  await dialog.getByRole("button", { name: "Invoke" }).click();
  await dialog.getByText("Not sent").waitFor();
  assert.match(await dialog.getByTestId("error-message").innerText(), /the input is not JSON/);
  assert.equal(sent.length, 2);
  await page.close();
});

test("setting an Attribute shows the new value; a lost answer is sent again with the same request ID", async () => {
  const run = await waitingOrder("attr");
  const page = await openRun(run);
  const sent = recordCalls(page, "SetAttributes");
  let dialog = await openAction(page, "Set an Attribute…", "Set an Attribute");
  await dialog.getByLabel(/^Key/).fill("items");
  await dialog.getByLabel("Type").selectOption("int64");
  await valueBox(dialog).fill("7");
  await screenshot(page, "action-set-attribute");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the attribute modal");
  // The first send never reaches the server: the modal offers to send it again, same request ID.
  await page.route("**/dex.FlowService/SetAttributes", (route) => route.abort("connectionreset"));
  await dialog.getByRole("button", { name: "Set the Attribute" }).click();
  const retry = dialog.getByRole("button", { name: "Send it again (same request ID)" });
  await retry.waitFor({ timeout: 10_000 });
  assert.match(await dialog.getByTestId("error-alert").innerText(), /UNREACHABLE/);
  await page.unroute("**/dex.FlowService/SetAttributes");
  await retry.click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  assert.equal(sent.length, 2);
  assert.match(sent[0].requestId, uuid);
  assert.equal(sent[1].requestId, sent[0].requestId);
  assert.deepEqual(sent[1].writes, [{ key: "items", instanceKey: "", value: { int64Value: "7" } }]);
  const row = page.getByTestId("attribute-row").filter({ hasText: "items" });
  await eventually(async () => /int64\s+7/.test(await row.innerText()), 10_000, "items = 7 in the Attributes");

  // A JSON Attribute and a datetime: each a new request ID.
  dialog = await openAction(page, "Set an Attribute…", "Set an Attribute");
  await dialog.getByLabel(/^Key/).fill("tags");
  await dialog.getByLabel("Type").selectOption("json");
  await valueBox(dialog).fill('["eu", "gift"]');
  await dialog.getByRole("button", { name: "Set the Attribute" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  assert.notEqual(sent[2].requestId, sent[0].requestId);
  dialog = await openAction(page, "Set an Attribute…", "Set an Attribute");
  await dialog.getByLabel(/^Key/).fill("placed-at");
  await dialog.getByLabel("Type").selectOption("datetime");
  await valueBox(dialog).fill("2027-01-15T10:00:00Z");
  await dialog.getByRole("button", { name: "Set the Attribute" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  await eventually(
    async () => /placed-at\s+\S*\s*datetime\s+2027-01-15 10:00:00.000 UTC/.test(await page.getByTestId("attributes").innerText()),
    10_000,
    "placed-at in the Attributes",
  );
  assert.match(await page.getByTestId("attributes").innerText(), /tags\s+\S*\s*json/);
  // Delete: a write without a value.
  dialog = await openAction(page, "Set an Attribute…", "Set an Attribute");
  await dialog.getByLabel(/^Key/).fill("items");
  await dialog.getByLabel("Delete it (write no value)").check();
  await dialog.getByRole("button", { name: "Delete the Attribute" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  await eventually(async () => (await row.count()) === 0, 10_000, "items gone from the Attributes");
  assert.deepEqual(sent.at(-1).writes, [{ key: "items", instanceKey: "" }]);
  assert.equal(new Set(sent.map((b) => b.requestId)).size, sent.length - 1);
  await page.close();
});

test("refused actions show the server's code and message", async () => {
  const run = await waitingOrder("refused");
  const page = await openRun(run);
  // A Channel the Flow type does not declare.
  const nope = await serverError("PublishToChannel", { ...run, channel: "no-such-channel", messages: [payload({})] });
  let dialog = await openAction(page, "Publish to a Channel…", "Publish to a Channel");
  await dialog.getByLabel(/^Channel/).fill("no-such-channel");
  await dialog.getByRole("button", { name: "Publish" }).click();
  await dialog.getByTestId("error-message").waitFor({ timeout: 10_000 });
  assert.equal(await dialog.getByTestId("error-message").innerText(), nope.message);
  assert.match(nope.message, /no-such-channel/);
  assert.match(await dialog.getByTestId("error-alert").innerText(), /The server refused it\s+INVALID_ARGUMENT/);
  assert.equal(await dialog.getByTestId("error-alert").getAttribute("role"), "alert");
  await screenshot(page, "action-refused");
  await dialog.getByRole("button", { name: "Cancel" }).click();
  await dialog.waitFor({ state: "hidden" });
  // A JSON Attribute whose value is not JSON.
  const bad = '{"eu": ';
  const badJson = await serverError("SetAttributes", { flow: run, writes: [{ key: "tags", value: { jsonValue: bad } }] });
  dialog = await openAction(page, "Set an Attribute…", "Set an Attribute");
  await dialog.getByLabel(/^Key/).fill("tags");
  await dialog.getByLabel("Type").selectOption("json");
  await valueBox(dialog).fill(bad);
  await dialog.getByRole("button", { name: "Set the Attribute" }).click();
  await dialog.getByTestId("error-message").waitFor({ timeout: 10_000 });
  assert.equal(await dialog.getByTestId("error-message").innerText(), badJson.message);
  assert.equal(badJson.code, "INVALID_ARGUMENT");
  // A value of another type than declared (customer is a string).
  await dialog.getByLabel(/^Key/).fill("customer");
  await dialog.getByLabel("Type").selectOption("int64");
  await valueBox(dialog).fill("3");
  await dialog.getByRole("button", { name: "Set the Attribute" }).click();
  await eventually(
    async () => /customer/.test(await dialog.getByTestId("error-message").innerText()),
    10_000,
    "the type error",
  );
  await page.close();
});

test("stopping a run (terminate, with a reason) closes it", async () => {
  const run = await waitingOrder("stop");
  const page = await openRun(run);
  const sent = recordCalls(page, "StopFlow");
  const dialog = await openAction(page, "Stop the run…", "Stop the run");
  assert.match(await dialog.innerText(), new RegExp(`Run ${run.runId.replace(/[.]/g, "\\.")} of ${run.flowId}`));
  await dialog.getByRole("radio", { name: "Terminate" }).check();
  await dialog.getByLabel("Reason").fill("stopped from dex-web's browser test");
  await screenshot(page, "action-stop");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the stop modal");
  await dialog.getByRole("button", { name: "Stop the run" }).click();
  await dialog.waitFor({ state: "hidden", timeout: 10_000 });
  await page.locator('[data-kind="FLOW_CLOSED"]').waitFor({ timeout: 10_000 });
  await eventually(async () => (await page.getByTestId("summary-status").innerText()) === "TERMINATED", 10_000, "TERMINATED");
  await page.getByText("stopped from dex-web's browser test").first().waitFor();
  assert.equal(sent.length, 1);
  assert.equal(sent[0].runId, run.runId, "the run is named explicitly");
  assert.equal(sent[0].mode, "STOP_TERMINATE");
  assert.match(sent[0].requestId, uuid);
  const desc = await dex.call("DescribeFlow", run);
  assert.equal(desc.status, "FLOW_TERMINATED");
  assert.equal(desc.closeReason, "stopped from dex-web's browser test");
  await page.close();
});

test("a time travel shows its dry run, then starts the new run and the page moves to it", async (t) => {
  const run = await waitingOrder("travel");
  const page = await openRun(run);
  const sent = recordCalls(page, "TimeTravel");
  const dialog = await openAction(page, "Time travel…", "Time travel");
  await dialog.getByLabel("Point").selectOption("TIME_TRAVEL_FIRST_OF_STEP_TYPE");
  await dialog.getByLabel(/^Step type/).fill("Ship");
  await dialog.getByLabel("Reason").fill("try the shipping again");
  await dialog.getByRole("button", { name: "Preview (dry run)" }).click();
  const preview = dialog.getByTestId("time-travel-preview");
  await preview.waitFor({ timeout: 10_000 });
  // At Ship's first start: Ship-1 is the active execution; the Attributes are those of then.
  assert.match(await preview.getByTestId("preview-steps").innerText(), /Ship-1/);
  assert.match(await preview.innerText(), new RegExp(`from run ${run.runId.replace(/[.]/g, "\\.")}`));
  assert.match(await preview.innerText(), /customer\s+\S*\s*string\s+acme/);
  assert.equal(sent.length, 1);
  assert.equal(sent[0].dryRun, true);
  // The dry run changed nothing.
  assert.equal((await dex.call("DescribeFlow", { flowId: run.flowId })).runId, run.runId);
  await screenshot(page, "action-time-travel-preview");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the time-travel preview");
  const t0 = Date.now();
  await dialog.getByRole("button", { name: "Travel" }).click();
  await page.waitForURL((u) => u.pathname.startsWith(`/flows/${run.flowId}/runs/`) && !u.pathname.endsWith(run.runId), {
    timeout: 15_000,
  });
  const newRunId = decodeURIComponent(new URL(page.url()).pathname.split("/").pop());
  await eventually(async () => (await page.getByTestId("summary-run-id").innerText()) === newRunId, 10_000, "the new run's page");
  t.diagnostic(`time travel: ${Date.now() - t0} ms from "Travel" to the new run's page`);
  assert.equal(sent.length, 2);
  assert.equal(sent[1].dryRun, false);
  assert.deepEqual(sent[1].point, { kind: "TIME_TRAVEL_FIRST_OF_STEP_TYPE", stepType: "Ship" });
  assert.notEqual(sent[1].requestId, sent[0].requestId);
  const desc = await dex.call("DescribeFlow", { flowId: run.flowId, runId: newRunId });
  assert.equal(desc.traveledFromRunId, run.runId);
  assert.equal((await dex.call("DescribeFlow", run)).status, "FLOW_TERMINATED");
  await page.close();
});
