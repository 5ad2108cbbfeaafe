// dex-web's Run page (issue 29) in a real browser against a real dex-server-zd dev and the example
// Flows' Worker (harness.mjs): large values show their first 4 KiB, their size and "Show all"
// (from the keyboard too), and a value GetFlowState left out is read with GetAttributes; the
// summary links a SubFlow's parent and children, a Flow retry's runs, a continue-as-new's runs and
// a time travel's runs, both ways; the current state shows a retrying attempt's last failure, and
// the timeline its failed, timed-out and not-completed attempts. Screenshots go to screenshots/.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { accessibilityViolations, binDir, eventually, payload, screenshot, startDex, startStack, stopStack } from "./harness.mjs";

let dex;
let browser;
let context;
const suffix = Date.now().toString(36);
const KiB = 1024;

before(async () => {
  ({ dex, browser, context } = await startStack());
});

after(async () => {
  await stopStack({ dex, browser });
});

/** StartFlow, retried until the Worker has declared the Flow types. */
async function start(flowId, flowType, input, options) {
  const r = await eventually(
    () => dex.call("StartFlow", { flowId, flowType, input: payload(input), ...(options ? { options } : {}) }),
    30_000,
    `StartFlow ${flowType}`,
  );
  return r.runId;
}

async function closed(flowId, runId, timeoutMs = 60_000) {
  return eventually(async () => {
    const d = await dex.call("DescribeFlow", { flowId, runId: runId ?? "" });
    return d.status !== "FLOW_RUNNING" && d;
  }, timeoutMs, `${flowId} to close`);
}

const runPath = (flowId, runId) => `/flows/${encodeURIComponent(flowId)}/runs/${encodeURIComponent(runId)}`;

async function openRun(page, flowId, runId) {
  await page.goto(`${dex.webUrl}${runPath(flowId, runId)}`);
  await page.getByTestId("run-summary").waitFor({ timeout: 15_000 });
  await page.getByTestId("flow-state").waitFor({ timeout: 15_000 });
}

test("large values show their first 4 KiB, their size and Show all; a value left out is read with GetAttributes", async (t) => {
  // E2ECounter: any input; AttributeMap `note` (string) is the clients'; Step Count waits on Channel `stop`.
  const flowId = `web-big-${suffix}`;
  const big = "v".repeat(100 * KiB - 10); // the input {"big":"vvv..."}: 100 KiB of JSON
  const runId = await start(flowId, "E2ECounter", { big });
  const flow = { flowId, runId };
  await dex.call("SetAttributes", { flow, writes: [{ key: "note", instanceKey: "big", value: { stringValue: "n".repeat(100 * KiB) } }], requestId: `big-${suffix}` });
  const page = await context.newPage();
  const t0 = Date.now();
  await openRun(page, flowId, runId);
  t.diagnostic(`a page with two 100 KiB values: ${Date.now() - t0} ms to the summary and the state`);

  // The input: its first 4 KiB, "The first 4.0 KiB of 100.0 KiB shown.", and the button.
  const input = page.getByTestId("run-summary").getByTestId("truncated-value").first();
  assert.equal(await input.getAttribute("data-truncated"), "true");
  assert.equal(Number(await input.getAttribute("data-bytes")), 100 * KiB);
  assert.equal(await input.getByTestId("truncated-note").innerText(), "The first 4.0 KiB of 100.0 KiB shown.");
  const shownBefore = (await page.getByLabel("Input", { exact: true }).innerText()).length;
  assert.ok(shownBefore >= 4 * KiB && shownBefore < 5 * KiB, `the input shows ${shownBefore} characters`);
  // From the keyboard: focus the button, Enter shows it all (pretty-printed now), Enter again less.
  const showAll = page.getByRole("button", { name: "Show all (100.0 KiB) of Input" });
  await showAll.focus();
  await page.keyboard.press("Enter");
  await eventually(async () => (await input.getAttribute("data-truncated")) === "false", 5000, "the whole input");
  const whole = await page.getByLabel("Input", { exact: true }).innerText();
  assert.equal(JSON.parse(whole).big, big);
  assert.equal(await page.getByRole("button", { name: "Show less of Input" }).getAttribute("aria-expanded"), "true");
  await page.keyboard.press("Enter"); // the focus stayed on the button, now "Show less"
  await eventually(async () => (await input.getAttribute("data-truncated")) === "true", 5000, "the input truncated again");

  // The Attribute: the same, by a click.
  const row = page.getByTestId("attribute-row").filter({ hasText: "note" });
  const value = row.getByTestId("truncated-value");
  assert.equal(await value.getAttribute("data-truncated"), "true");
  assert.match(await row.innerText(), /The first 4\.0 KiB of 100\.0 KiB shown\./);
  await screenshot(page, "run-large-values");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of a page with truncated values");
  await row.getByRole("button", { name: /^Show all \(100\.0 KiB\)/ }).click();
  await eventually(async () => (await value.getAttribute("data-truncated")) === "false", 5000, "the whole Attribute");
  assert.ok((await row.innerText()).includes("n".repeat(100 * KiB)));

  // Two values of 4.5 MiB: GetFlowState answers at most 8 MiB of values, so one is left out with
  // its size; "Load it" reads it with GetAttributes.
  const huge = (c) => c.repeat(4.5 * KiB * KiB);
  for (const k of ["huge-a", "huge-b"])
    await dex.call("SetAttributes", { flow, writes: [{ key: "note", instanceKey: k, value: { stringValue: huge(k.at(-1)) } }], requestId: `${k}-${suffix}` });
  const state = await dex.call("GetFlowState", flow);
  const leftOut = state.attributes.filter((a) => Number(a.omittedBytes) > 0).map((a) => a.attribute.instanceKey);
  assert.equal(leftOut.length, 1, `left out: ${leftOut}`);
  await page.reload();
  await page.getByTestId("flow-state").waitFor({ timeout: 15_000 });
  const leftRow = page.getByTestId("attribute-row").filter({ hasText: leftOut[0] });
  assert.match(await leftRow.getByTestId("left-out-value").innerText(), /4\.5 MiB, left out of the state's answer/);
  const calls = [];
  page.on("request", (r) => r.url().endsWith("/GetAttributes") && calls.push(r.postDataJSON()));
  await leftRow.getByRole("button", { name: /^Load it \(4\.5 MiB\)/ }).click();
  const loaded = leftRow.getByTestId("truncated-value");
  await loaded.waitFor({ timeout: 15_000 });
  assert.deepEqual(calls, [{ flow, keys: ["note"] }]);
  assert.equal(Number(await loaded.getAttribute("data-bytes")), 4.5 * KiB * KiB);
  assert.match(await loaded.innerText(), /The first 4\.0 KiB of 4\.5 MiB shown\./);

  // A published message of 100 KiB ends the run; its event's JSON is truncated too.
  await dex.call("PublishToChannel", { flowId, runId, channel: "stop", messages: [payload({ stop: "s".repeat(100 * KiB) })], requestId: `stop-${suffix}` });
  const published = page.locator('[data-testid="history-event"][data-kind="CHANNEL_PUBLISHED"]');
  await published.waitFor({ timeout: 15_000 });
  const seq = (await published.locator("td").first().innerText()).trim();
  await page.getByRole("button", { name: `Show the JSON of event ${seq}` }).click();
  const eventJson = page.locator(`#event-${seq}-json`).getByTestId("truncated-value");
  assert.equal(await eventJson.getAttribute("data-truncated"), "true");
  assert.ok(Number(await eventJson.getAttribute("data-bytes")) > 100 * KiB);
  await eventJson.getByRole("button", { name: /^Show all/ }).click();
  await eventually(async () => (await eventJson.getAttribute("data-truncated")) === "false", 5000, "the whole event");
  assert.match(await page.getByLabel(`Event ${seq} as JSON`, { exact: true }).innerText(), /"kind": "CHANNEL_PUBLISHED"/);
  await page.close();
});

test("the summary links a SubFlow's children and the child its parent", async (t) => {
  // FanOut: Fan waits AllOf three SubFlows of Square, `<flow id>/Fan-1/<i>`.
  const flowId = `web-fan-${suffix}`;
  const runId = await start(flowId, "FanOut", { children: 3 });
  await closed(flowId, runId);
  const page = await context.newPage();
  const t0 = Date.now();
  await openRun(page, flowId, runId);
  const children = page.getByTestId("child-run");
  await eventually(async () => (await children.count()) === 3, 10_000, "three children");
  t.diagnostic(`FanOut's page: ${Date.now() - t0} ms to its children`);
  const ids = await children.evaluateAll((cs) => cs.map((c) => `${c.dataset.flowId} ${c.dataset.status}`));
  assert.deepEqual(ids.sort(), [0, 1, 2].map((i) => `${flowId}/Fan-1/${i} COMPLETED`));
  assert.match(await children.first().innerText(), /Fan-1, condition 0, COMPLETED/);
  await page.getByTestId("run-summary").screenshot({ path: path.join(path.dirname(new URL(import.meta.url).pathname), "screenshots", "run-children.png") });
  // A child's page, by its link: its parent links back.
  const child = `${flowId}/Fan-1/1`;
  await page.getByRole("link", { name: child, exact: true }).click();
  await eventually(async () => (await page.getByTestId("summary-flow-id").innerText()) === child, 10_000, "the child's page");
  const childRun = await dex.call("DescribeFlow", { flowId: child });
  assert.equal(await page.getByTestId("summary-run-id").innerText(), childRun.runId);
  const parent = page.getByTestId("parent-run");
  assert.match(await parent.innerText(), /SubFlow parent \(Fan-1\)/);
  await parent.getByRole("link").click();
  await eventually(async () => (await page.getByTestId("summary-flow-id").innerText()) === flowId, 10_000, "back on the parent's page");
  // The children come with the parent's history, after its summary.
  await eventually(async () => (await page.getByTestId("child-run").count()) === 3, 10_000, "the parent's three children again");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of a page with children");
  await page.close();
});

test("a Flow retry's, a continue-as-new's and a time travel's runs link both ways", async () => {
  const page = await context.newPage();
  const follow = async (testId, flowId, runId) => {
    const link = page.getByTestId(testId);
    assert.match(await link.innerText(), new RegExp(runId.replace(/\./g, "\\.")));
    await link.getByRole("link").click();
    await eventually(async () => (await page.getByTestId("summary-run-id").innerText()) === runId, 10_000, `${testId}'s page`);
  };

  // RetryOnce fails its first run; the retry policy starts `<run id>.2`, which completes.
  const retryId = `web-retry-${suffix}`;
  const first = await start(retryId, "RetryOnce", { fail_runs: 1 }, { retryPolicy: { initialIntervalMs: "200", maximumAttempts: 3 } });
  const second = (await eventually(async () => {
    const d = await dex.call("DescribeFlow", { flowId: retryId });
    return d.status === "FLOW_COMPLETED" && d;
  }, 30_000, "the retry's run to complete")).runId;
  assert.equal(second, `${first}.2`);
  await openRun(page, retryId, first);
  await follow("next-run", retryId, second);
  await follow("previous-run", retryId, first);

  // E2ECounter continued as new: the old run links the new one, which links back.
  const canId = `web-can-${suffix}`;
  const old = await start(canId, "E2ECounter", {});
  const r = await eventually(
    () => dex.call("TriggerContinueAsNew", { flow: { flowId: canId, runId: old }, reason: "the browser test", requestId: `can-${suffix}` }),
    10_000,
    "TriggerContinueAsNew",
  );
  const next = r.newRunId || (await closed(canId, old)).nextRunId;
  await closed(canId, old);
  await openRun(page, canId, old);
  assert.equal(await page.getByTestId("summary-status").innerText(), "CONTINUED_AS_NEW");
  await follow("continued-as", canId, next);
  await follow("continued-from", canId, old);

  // Time travel of the new run to its beginning: the traveled-to and traveled-from links.
  const tt = await dex.call("TimeTravel", {
    flow: { flowId: canId, runId: next },
    point: { kind: "TIME_TRAVEL_BEGINNING" },
    reason: "the browser test",
    requestId: `tt-${suffix}`,
  });
  await openRun(page, canId, next);
  await eventually(async () => (await page.getByTestId("traveled-to").count()) === 1, 10_000, "the traveled-to link");
  await follow("traveled-to", canId, tt.runId);
  await follow("traveled-from", canId, next);
  await dex.call("StopFlow", { flowId: canId, runId: tt.runId, mode: "STOP_TERMINATE", reason: "done", requestId: `stop-${suffix}` });
  await page.close();
});

test("the state shows a retrying attempt's last failure; the timeline its failed attempts", async (t) => {
  // MoneyTransfer: Credit refuses every attempt (fail_credit), 1 s and then 2 s apart; its
  // exhausted retries go on to Compensate.
  const flowId = `web-credit-${suffix}`;
  const runId = await start(flowId, "MoneyTransfer", { amount: 30, to: "acct-2", fail_credit: true }, {
    initialAttributes: [{ key: "balance", value: { int64Value: "100" } }],
  });
  const waiting = await eventually(async () => {
    const s = await dex.call("GetFlowState", { flowId, runId });
    const credit = s.active.find((x) => x.stepType === "Credit");
    return credit?.lastFailure && credit.taskState === "TASK_BACKOFF" && credit;
  }, 20_000, "Credit waiting for its retry");
  const page = await context.newPage();
  await openRun(page, flowId, runId);
  const row = page.getByTestId("active-steps").locator(`[data-testid="step-row"][data-id="${waiting.stepExecutionId}"]`);
  await row.waitFor({ timeout: 5000 });
  const text = await row.innerText();
  t.diagnostic(`Credit's row: ${text.replace(/\s+/g, " ")}`);
  assert.match(text, /BACKOFF/);
  const failure = row.getByTestId("last-failure");
  assert.match(await failure.innerText(), /attempt 1, FAILED at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC:/);
  assert.match(await failure.innerText(), /the destination bank refused the credit/);
  // The timeline: attempt 1 failed, then the wait for the retry (the state's last failure splits them).
  const bars = page.locator(`[data-testid="timeline-row"][data-id="${waiting.stepExecutionId}"] [data-testid="timeline-bar"]`);
  await eventually(async () => (await bars.evaluateAll((bs) => bs.map((b) => b.dataset.outcome))).includes("failed"), 5000, "the failed attempt's bar");
  await screenshot(page, "run-retrying");
  // The run goes on to Compensate; the page follows it, without a reload.
  await eventually(async () => (await page.getByTestId("summary-status").innerText()) === "COMPLETED", 20_000, "the compensated run");
  // The summary (DescribeFlow) and the state (GetFlowState) are re-read side by side: the bars,
  // drawn from the state, may come a moment after the summary's status.
  const barsNow = () => bars.evaluateAll((bs) => bs.map((b) => `${b.dataset.outcome}:${b.dataset.attempts}`));
  let outcomes = [];
  await eventually(async () => {
    outcomes = await barsNow();
    return outcomes.length === 1 && outcomes[0] === "failed:1-3";
  }, 5000, "Credit's bars after the run").catch(() => {});
  t.diagnostic(`Credit's bars after the run: ${outcomes.join(", ")}`);
  // Its three attempts failed, the last one too: one bar of the three.
  assert.deepEqual(outcomes, ["failed:1-3"]);
  await page.close();
});

/** The examples' Worker with a work time, for a second server of its own. */
function slowWorker(apiAddress, workTime) {
  const child = spawn(path.join(binDir, "dex-flow-examples"), ["worker", "--server", apiAddress, "--work-time", workTime], { stdio: "ignore" });
  const exited = new Promise((res) => child.once("exit", res));
  return {
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

test("the timeline shows a timed-out attempt and one not completed (its Worker gone)", async (t) => {
  // A server of its own whose only Worker works 4.5 s a Step: E2EThreeSteps' attempts time out
  // after 4 s; E2ESlowStep's (60 s) is cut off when the Worker is killed.
  const own = await startDex();
  let worker;
  try {
    own.worker.child.kill("SIGKILL"); // its quick Worker: only the slow one takes tasks
    await own.worker.exited;
    worker = slowWorker(own.apiAddress, "4500ms");
    const start2 = (flowId, flowType) =>
      eventually(() => own.call("StartFlow", { flowId, flowType, input: payload({}) }), 30_000, `StartFlow ${flowType}`);
    const timedOut = await start2(`web-timeout-${suffix}`, "E2EThreeSteps");
    const cut = await start2(`web-cut-${suffix}`, "E2ESlowStep");
    const flowOf = (id, r) => ({ flowId: id, runId: r.runId });
    const fetch1 = await eventually(async () => {
      const s = await own.call("GetFlowState", flowOf(`web-timeout-${suffix}`, timedOut));
      const x = s.active.find((e) => e.stepType === "Fetch");
      return x?.lastFailure?.outcome === "ATTEMPT_TIMED_OUT" && x;
    }, 20_000, "Fetch's first attempt to time out");
    // The slow Step's attempt runs; the Worker is killed under it.
    await eventually(async () => {
      const s = await own.call("GetFlowState", flowOf(`web-cut-${suffix}`, cut));
      return s.active.some((e) => e.taskState === "TASK_RUNNING");
    }, 20_000, "Slow's attempt to run");
    await worker.stop();
    const slow = await eventually(async () => {
      const s = await own.call("GetFlowState", flowOf(`web-cut-${suffix}`, cut));
      const x = s.active.find((e) => e.stepType === "Slow");
      return x?.lastFailure?.outcome === "ATTEMPT_NOT_COMPLETED" && x;
    }, 30_000, "Slow's attempt not completed");

    const page = await context.newPage();
    const outcomesOf = async (flowId, runId, id) => {
      await page.goto(`${own.webUrl}${runPath(flowId, runId)}`);
      const bars = page.locator(`[data-testid="timeline-row"][data-id="${id}"] [data-testid="timeline-bar"]`);
      await bars.first().waitFor({ timeout: 15_000 });
      await page.getByTestId("flow-state").waitFor({ timeout: 15_000 });
      return bars.evaluateAll((bs) => bs.map((b) => b.dataset.outcome));
    };
    const a = await outcomesOf(`web-timeout-${suffix}`, timedOut.runId, fetch1.stepExecutionId);
    t.diagnostic(`Fetch's bars: ${a.join(", ")}`);
    assert.ok(a.includes("timed_out"), a.join(", "));
    // Fetch's attempts keep timing out every 4 s while the rest of the test runs: any of them.
  assert.match(await page.getByTestId("active-steps").getByTestId("last-failure").innerText(), /attempt \d+, TIMED_OUT/);
    await screenshot(page, "run-timed-out");
    const b = await outcomesOf(`web-cut-${suffix}`, cut.runId, slow.stepExecutionId);
    t.diagnostic(`Slow's bars: ${b.join(", ")}`);
    assert.ok(b.includes("not_completed"), b.join(", "));
    assert.match(await page.getByTestId("active-steps").getByTestId("last-failure").innerText(), /attempt 1, NOT_COMPLETED/);
    // The legend names them.
    assert.match(await page.getByTestId("timeline-section").innerText(), /timed out/);
    await page.close();
  } finally {
    await worker?.stop();
    await own.stop();
  }
});
