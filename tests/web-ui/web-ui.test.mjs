// dex-web in a real browser against a real dex-server-zd dev and the example Flows' Worker
// (harness.mjs): Search finds a run by Flow ID and by an indexed Attribute, the Run view shows the
// summary, the state and the history, a running run's page shows a new event within 1 s without a
// reload, a bad query shows the server's message, and the Node view shows AdminService.Describe.
// Each view is saved to screenshots/ (laptop size, 1366x900); load times are printed.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { accessibilityViolations, eventually, payload, screenshot, startStack, stopStack } from "./harness.mjs";

let dex;
let browser;
let context;
const suffix = `${Date.now().toString(36)}`;
const orderId = `web-order-${suffix}`;
const customer = `acme-${suffix}`;

before(async () => {
  ({ dex, browser, context } = await startStack());
  // An order that waits for the seller's approval (its reminder Timer is a day away).
  await dex.call("StartFlow", {
    flowId: orderId,
    flowType: "OrderProcessing",
    input: payload({ order: orderId, amount: 42 }),
    options: {
      initialAttributes: [
        { key: "customer", value: { stringValue: customer } },
        { key: "total", value: { doubleValue: 99.5 } },
      ],
    },
  });
  // Wait until the Worker has charged it (OrderStatus is written by its Steps).
  await eventually(async () => {
    const s = await dex.call("GetFlowState", { flowId: orderId });
    return s.active.some((e) => e.stepType === "Ship" && e.phase === "PHASE_WAITING");
  }, 30_000, "the order's Ship Step to wait");
});

after(async () => {
  await stopStack({ dex, browser });
});

/** Opens a URL of the app and answers the ms until `ready` (a locator) is visible. */
async function load(page, url, ready) {
  const t0 = Date.now();
  await page.goto(`${dex.webUrl}${url}`);
  await ready.first().waitFor({ state: "visible", timeout: 15_000 });
  return Date.now() - t0;
}

test("search finds a started run by its Flow ID (the query in the URL)", async (t) => {
  const page = await context.newPage();
  const q = encodeURIComponent(`FlowId = '${orderId}'`);
  const row = page.getByTestId("result-row").filter({ hasText: orderId });
  const ms = await load(page, `/search?q=${q}`, row);
  t.diagnostic(`search page by Flow ID: ${ms} ms to the row`);
  assert.equal(await page.getByTestId("result-row").count(), 1);
  assert.match(await row.innerText(), /OrderProcessing/);
  assert.match(await row.innerText(), /RUNNING/);
  await page.close();
});

test("search finds the run by an indexed Attribute typed into the query box", async (t) => {
  const page = await context.newPage();
  await load(page, "/", page.getByLabel("Query"));
  const query = page.getByLabel("Query");
  const text = `customer = '${customer}' AND total > 50`;
  await query.fill(text);
  const t0 = Date.now();
  await query.press("Enter"); // the keyboard alone searches
  // The list of every run shows until the query's answer replaces it (data-query says which).
  await page.locator(`[data-testid="results"][data-query="${text}"]`).waitFor({ timeout: 15_000 });
  assert.equal(await page.getByTestId("result-row").count(), 1);
  const row = page.getByTestId("result-row").filter({ hasText: orderId });
  t.diagnostic(`search by Attribute: ${Date.now() - t0} ms from Enter to the row`);
  assert.match(await row.innerText(), new RegExp(`customer=${customer}`));
  assert.match(decodeURIComponent(page.url()).replace(/\+/g, " "), new RegExp(`q=customer = '${customer}'`));
  await screenshot(page, "search");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of search");
  await page.close();
});

test("the run page shows the summary, the state and the history", async (t) => {
  const page = await context.newPage();
  const q = encodeURIComponent(`FlowId = '${orderId}'`);
  await load(page, `/search?q=${q}`, page.getByTestId("result-row"));
  const t0 = Date.now();
  await page.getByRole("link", { name: orderId }).click();
  await page.getByTestId("history-event").first().waitFor({ timeout: 15_000 });
  await page.getByTestId("active-steps").waitFor({ timeout: 15_000 });
  t.diagnostic(`run page: ${Date.now() - t0} ms from the click to summary, state and history`);
  const desc = await dex.call("DescribeFlow", { flowId: orderId });
  assert.equal(await page.getByTestId("summary-flow-id").innerText(), orderId);
  assert.equal(await page.getByTestId("summary-run-id").innerText(), desc.runId);
  assert.equal(await page.getByTestId("summary-status").innerText(), "RUNNING");
  // The state: Ship waits (AnyOf the approval Channel, the reminder Timer); the Attributes.
  const ship = page.getByTestId("active-steps").getByTestId("step-row").filter({ hasText: "Ship-1" });
  assert.match(await ship.innerText(), /WAITING/);
  assert.match(await ship.innerText(), /Channel seller-approval/);
  const attributes = await page.getByTestId("attributes").innerText();
  assert.match(attributes, new RegExp(customer));
  assert.match(attributes, /order-status\s+\S*\s*string\s+awaiting-approval/);
  // The history, oldest first; an event's JSON opens from its button.
  const kinds = await page.getByTestId("history-event").evaluateAll((rows) => rows.map((r) => r.dataset.kind));
  assert.equal(kinds[0], "FLOW_STARTED");
  assert.ok(kinds.includes("EXECUTE_COMPLETED"), kinds.join(","));
  // (seq counts from 0: FLOW_STARTED is event 0)
  const json = page.getByRole("button", { name: "Show the JSON of event 0" });
  await json.focus();
  await page.keyboard.press("Enter");
  assert.equal(await page.getByRole("button", { name: "Hide the JSON of event 0" }).getAttribute("aria-expanded"), "true");
  assert.match(await page.getByLabel("Event 0 as JSON").innerText(), /"kind": "FLOW_STARTED"/);
  await page.getByTestId("live-badge").waitFor();
  await screenshot(page, "run");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of run");
  await page.close();
});

test("a running run's page shows a new event within 1 s, without a reload", async (t) => {
  const flowId = `web-signup-${suffix}`;
  const started = await dex.call("StartFlow", {
    flowId,
    flowType: "SignUp",
    input: payload({ email: "ann@example.com", code: "c-7" }),
  });
  const page = await context.newPage();
  const ms = await load(page, `/flows/${flowId}/runs/${started.runId}`, page.getByTestId("history-event"));
  t.diagnostic(`run page by URL: ${ms} ms to the first event`);
  // Following: the live badge, and AwaitVerification waiting on Channel "verify".
  await page.getByTestId("live-badge").filter({ hasText: "live" }).waitFor({ timeout: 15_000 });
  await page
    .getByTestId("active-steps")
    .getByTestId("step-row")
    .filter({ hasText: "AwaitVerification-1" })
    .filter({ hasText: "WAITING" })
    .waitFor({ timeout: 15_000 });
  const before = await page.getByTestId("history-event").count();
  const t0 = Date.now();
  await dex.call("PublishToChannel", { flowId, channel: "verify", messages: [payload({ code: "c-7" })] });
  await page.locator('[data-kind="CHANNEL_PUBLISHED"]').waitFor({ timeout: 5_000 });
  const shown = Date.now() - t0;
  t.diagnostic(`live: the published message's event shown ${shown} ms after the publish was answered`);
  assert.ok(shown < 1000, `the event took ${shown} ms to show`);
  assert.ok((await page.getByTestId("history-event").count()) > before);
  // The publish completes the sign-up: the run closes and the page says so, still without a reload.
  await page.locator('[data-kind="FLOW_CLOSED"]').waitFor({ timeout: 15_000 });
  await eventually(async () => (await page.getByTestId("summary-status").innerText()) === "COMPLETED", 10_000, "COMPLETED in the summary");
  await screenshot(page, "run-live-completed");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of run-live-completed");
  await page.close();
});

test("paging follows the page tokens forward and back", async (t) => {
  // 60 runs whose Flow IDs sort in a known order: 50 on the first page (the app's page size), 10 on the second.
  const ids = Array.from({ length: 60 }, (_, i) => `page-${suffix}-${String(i).padStart(3, "0")}`);
  for (const flowId of ids)
    await dex.call("StartFlow", { flowId, flowType: "SignUp", input: payload({ email: "p@example.com", code: "x" }) });
  const text = `FlowId STARTS_WITH 'page-${suffix}-' ORDER BY FlowId ASC`;
  const page = await context.newPage();
  const rows = page.getByTestId("result-row");
  const ms = await load(page, `/search?q=${encodeURIComponent(text)}`, page.locator(`[data-query="${text}"]`));
  t.diagnostic(`paging: ${ms} ms to the first page of 50`);
  const firstCells = () => rows.evaluateAll((rs) => rs.map((r) => r.querySelector("td").innerText));
  assert.deepEqual(await firstCells(), ids.slice(0, 50));
  assert.ok(await page.getByRole("button", { name: "Previous page" }).isDisabled());
  await page.getByRole("button", { name: "Next page" }).click();
  await page.getByText("Page 2").waitFor();
  await eventually(async () => (await rows.count()) === 10, 10_000, "the second page's 10 rows");
  assert.deepEqual(await firstCells(), ids.slice(50));
  assert.ok(await page.getByRole("button", { name: "Next page" }).isDisabled());
  await page.getByRole("button", { name: "Previous page" }).click();
  await page.getByText("Page 1").waitFor();
  await eventually(async () => (await rows.count()) === 50, 10_000, "the first page again");
  assert.deepEqual(await firstCells(), ids.slice(0, 50));
  await page.close();
});

test("a long history loads 100 events a page, then follows the run live until it stops", async (t) => {
  // An order whose reminder Timer fires every 100 ms: Ship waits again and again, 3 events a round.
  const flowId = `web-loop-${suffix}`;
  const started = await dex.call("StartFlow", {
    flowId,
    flowType: "OrderProcessing",
    input: payload({ order: flowId, amount: 1, reminder_ms: 100 }),
  });
  const flow = { flowId, runId: started.runId };
  await eventually(
    async () => (await dex.call("GetHistoryEvents", { flow, afterSeq: "150", pageSize: 1 })).events.length > 0,
    60_000,
    "more than 150 events",
  );
  const page = await context.newPage();
  const events = page.getByTestId("history-event");
  const ms = await load(page, `/flows/${flowId}/runs/${started.runId}`, events);
  t.diagnostic(`long history: ${ms} ms to the first page of events`);
  assert.equal(await events.count(), 100);
  const more = page.getByRole("button", { name: "Load more events" });
  for (let pages = 1; await more.isVisible(); pages++) {
    assert.ok(pages < 30, "the pages never caught up with the run");
    const before = await events.count();
    await more.click();
    await eventually(async () => (await events.count()) > before || !(await more.isVisible()), 10_000, "the next page");
  }
  // Every page read: the page follows the run, and its events keep coming without a reload.
  await page.getByTestId("live-badge").filter({ hasText: "live" }).waitFor({ timeout: 10_000 });
  const read = await events.count();
  await eventually(async () => (await events.count()) > read + 3, 10_000, "new events while following");
  await dex.call("StopFlow", { flowId, mode: "STOP_TERMINATE", reason: "the browser test is done" });
  await page.locator('[data-kind="FLOW_CLOSED"]').waitFor({ timeout: 10_000 });
  await eventually(async () => (await page.getByTestId("summary-status").innerText()) === "TERMINATED", 10_000, "TERMINATED");
  // The events are in order, each once.
  const seqs = await events.evaluateAll((rows) => rows.map((r) => Number(r.querySelector("td").innerText)));
  assert.deepEqual(seqs, seqs.map((_, i) => i));
  await page.close();
});

test("a bad query shows the server's own message", async (t) => {
  const bad = "Nope = 1";
  let expected;
  try {
    await dex.call("SearchFlows", { query: bad });
    assert.fail("the server took a bad query");
  } catch (e) {
    assert.equal(e.status, 400);
    expected = JSON.parse(e.body).message;
  }
  const page = await context.newPage();
  const ms = await load(page, `/search?q=${encodeURIComponent(bad)}`, page.getByTestId("error-message"));
  t.diagnostic(`bad query: ${ms} ms to the error`);
  assert.equal(await page.getByTestId("error-message").innerText(), expected);
  assert.match(expected, /unknown field 'Nope'/);
  assert.equal(await page.getByTestId("error-alert").getAttribute("role"), "alert");
  await screenshot(page, "search-error");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of search-error");
  await page.close();
});

test("an unknown run's page says NOT_FOUND in the server's words, once", async () => {
  const page = await context.newPage();
  await load(page, "/flows/no-such-flow/runs/no-such-run", page.getByTestId("error-message"));
  assert.equal(await page.getByTestId("error-alert").count(), 1);
  assert.match(await page.getByTestId("error-alert").innerText(), /NOT_FOUND/);
  assert.match(await page.getByTestId("error-message").innerText(), /no-such-flow/);
  assert.equal(await page.getByTestId("history").count(), 0);
  await page.close();
});

test("the node page shows AdminService.Describe and that this process serves", async (t) => {
  const described = await dex.call("Describe", {}, "dex.AdminService");
  const page = await context.newPage();
  const ms = await load(page, "/node", page.getByTestId("node-id"));
  t.diagnostic(`node page: ${ms} ms to Describe`);
  assert.equal(await page.getByTestId("node-id").innerText(), described.nodeId);
  assert.equal(await page.getByTestId("node-epoch").innerText(), described.nodeEpoch);
  await page.getByTestId("role-badge").filter({ hasText: "active: serving" }).waitFor({ timeout: 10_000 });
  await screenshot(page, "node");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of node");
  await page.close();
});

test("the credential box keeps a token for the tab and sends it as a Bearer credential", async () => {
  const page = await context.newPage();
  await load(page, "/node", page.getByTestId("node-id"));
  await page.getByLabel("Admin token").fill("s3cret-token");
  await page.getByLabel("Admin token").press("Enter");
  await page.getByText("admin token set (this tab)").waitFor();
  const sent = [];
  page.on("request", (r) => {
    if (r.url().includes("/api/v1/dex.")) sent.push(r.headers()["authorization"]);
  });
  await page.reload(); // sessionStorage outlives a reload of the tab
  await page.getByTestId("node-id").waitFor();
  assert.ok(sent.length >= 2, `calls seen: ${sent.length}`);
  assert.ok(sent.every((h) => h === "Bearer s3cret-token"), JSON.stringify(sent));
  await page.getByRole("button", { name: "Forget token" }).click();
  await page.getByLabel("Admin token").waitFor();
  await page.close();
});
