// Time travel against a real dex-server-zd dev: a run whose Charge fails on
// a bug (a flag the test flips) ends FAILED; a dry run shows the new run's
// start and changes nothing; with the bug fixed, a time travel to the Charge
// starts a new run from there that completes, both runs linked; a repeat with
// the same request ID answers that run. A running run traveled from ends
// TERMINATED; refusals keep the server's codes.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Attribute, Channel, Client, DexError, Flow, TaskError, Wait, Worker, goTo, gracefulComplete, type Step } from "../src/index";
import { DevServer, MemoryLogger } from "./helpers";

const stage = Attribute.string("stage");

// The bug: while it is there, every Charge fails for good (one attempt).
let chargeBroken = true;
const charge: Step<{ amount: number }> = {
  type: "Charge",
  options: { execute: { retry: { maximumAttempts: 1 } } },
  execute(ctx) {
    if (chargeBroken) throw new TaskError("card declined: the charge bug", { nonRetryable: true });
    // What the run held at the point: Order's write.
    const before = stage.get(ctx);
    stage.set(ctx, "charged");
    return gracefulComplete({ charged: ctx.input.amount, stageBefore: before, runId: ctx.runId });
  },
};
const order: Step<{ amount: number }> = {
  type: "Order",
  execute(ctx) {
    stage.set(ctx, "ordered");
    return goTo(charge, { amount: ctx.input.amount });
  },
};
const SHOP = new Flow({ type: "ts-tt-shop", startStep: order, steps: [order, charge], attributes: [stage] });

// A run that waits for "go" until a client publishes it.
const go = new Channel<string>("go");
const hold: Step = {
  type: "Hold",
  waitFor: () => Wait.anyOf(go.forOne()),
  execute: (ctx) => gracefulComplete({ runId: ctx.runId }),
};
const HOLD = new Flow({ type: "ts-tt-hold", startStep: hold, steps: [hold], channels: [go] });

describe("time travel on a dex server", () => {
  let server: DevServer;
  let worker: Worker;
  let client: Client;

  before(async () => {
    server = await DevServer.start();
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(SHOP).host(HOLD);
    void worker.run();
    await worker.ready();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
  });

  after(async () => {
    client.close();
    await worker.shutdown();
    await server.stop();
  });

  const kinds = async (flowId: string, runId: string): Promise<string[]> => {
    const out: string[] = [];
    for await (const e of client.iterateHistoryEvents(flowId, { runId })) out.push(e.kind);
    return out;
  };

  test("a failed Charge, a dry run that changes nothing, then a time travel to the Charge that completes", async () => {
    const flowId = `tt-shop-${process.pid}`;
    chargeBroken = true;
    const started = await client.startFlow(SHOP, flowId, { amount: 5 });
    const failed = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    assert.equal(failed.status, "FAILED", failed.closeReason);
    assert.match(failed.closeReason, /charge bug/);
    const oldRun = started.runId;

    // The dry run: the run as it would start from Charge-1's start.
    const preview = await client.timeTravel(flowId, oldRun, { stepType: "Charge" }, { dryRun: true, reason: "a look first" });
    assert.equal(preview.alreadyDone, false);
    assert.notEqual(preview.runId, oldRun);
    const start = preview.start;
    assert.ok(start !== undefined, "a dry run answers the start");
    assert.deepEqual(
      [start.flow.flowId, start.flow.runId, start.flow.status, start.flow.traveledFromRunId, start.flow.input],
      [flowId, preview.runId, "RUNNING", oldRun, { amount: 5 }],
    );
    assert.deepEqual(start.active.map((a) => [a.stepExecutionId, a.phase]), [["Charge-1", "EXECUTE"]]);
    assert.equal(preview.attributes?.get(stage), "ordered");
    // ... and nothing changed.
    const still = await client.describeFlow(flowId);
    assert.deepEqual([still.runId, still.status, still.runs, still.traveledToRunId], [oldRun, "FAILED", 1, ""]);
    assert.equal((await kinds(flowId, oldRun)).includes("TIME_TRAVELED"), false);
    await assert.rejects(client.describeFlow(flowId, { runId: preview.runId }), (e: unknown) => e instanceof DexError && e.code === "NOT_FOUND");

    // The bug fixed: the new run starts at Charge-1 with the state it had then.
    chargeBroken = false;
    const requestId = `tt-${process.pid}`;
    const traveled = await client.timeTravel(flowId, oldRun, { stepType: "Charge" }, { reason: "fixed the charge bug", requestId });
    assert.equal(traveled.alreadyDone, false);
    assert.notEqual(traveled.runId, oldRun);
    assert.equal(traveled.start, undefined);
    const done = await client.waitForFlow(flowId, { runId: traveled.runId, timeoutMs: 30_000 });
    assert.equal(done.status, "COMPLETED", done.closeReason);
    assert.deepEqual(done.output, { charged: 5, stageBefore: "ordered", runId: traveled.runId });
    assert.equal((await client.getAttributes(flowId)).get(stage), "charged");

    // Linked both ways; the old run keeps its end.
    const latest = await client.describeFlow(flowId);
    assert.deepEqual([latest.runId, latest.traveledFromRunId, latest.traveledToRunId, latest.runs], [traveled.runId, oldRun, "", 2]);
    const old = await client.describeFlow(flowId, { runId: oldRun });
    assert.deepEqual([old.status, old.traveledToRunId, old.traveledFromRunId], ["FAILED", traveled.runId, ""]);
    assert.match(old.closeReason, /charge bug/);

    // The history tells it: the new run's FLOW_STARTED, the old run's TIME_TRAVELED.
    const first = (await client.getHistoryEvents(flowId, { runId: traveled.runId, pageSize: 1 })).events[0];
    assert.deepEqual(
      [first?.kind, first?.traveledFromRunId, first?.timeTravelPoint, first?.reason],
      ["FLOW_STARTED", oldRun, { stepType: "Charge", which: "latest" }, "fixed the charge bug"],
    );
    const away: { nextRunId: string; reason: string }[] = [];
    for await (const e of client.iterateHistoryEvents(flowId, { runId: oldRun })) if (e.kind === "TIME_TRAVELED") away.push({ nextRunId: e.nextRunId, reason: e.reason });
    assert.deepEqual(away, [{ nextRunId: traveled.runId, reason: "fixed the charge bug" }]);

    // A repeat with the same request ID answers the run the first made.
    const repeat = await client.timeTravel(flowId, oldRun, { stepType: "Charge" }, { reason: "fixed the charge bug", requestId });
    assert.deepEqual(repeat, { runId: traveled.runId, alreadyDone: true });
    assert.deepEqual([(await client.describeFlow(flowId)).runId, (await client.describeFlow(flowId)).runs], [traveled.runId, 2]);
  });

  test("a running run traveled from ends TERMINATED; refusals keep the server's codes", async () => {
    const flowId = `tt-hold-${process.pid}`;
    const started = await client.startFlow(HOLD, flowId);
    const beginning = new Date((await client.describeFlow(flowId)).startedAt);

    // A dry run by time: the start's state, the old run still RUNNING.
    const preview = await client.timeTravel(flowId, started.runId, { eventTime: beginning }, { dryRun: true });
    assert.deepEqual(preview.start?.active.map((a) => a.stepExecutionId), ["Hold-1"]);
    assert.equal((await client.describeFlow(flowId)).status, "RUNNING");

    const traveled = await client.timeTravel(flowId, started.runId, { beginning: true }, { reason: "start over" });
    const old = await client.describeFlow(flowId, { runId: started.runId });
    assert.equal(old.status, "TERMINATED");
    assert.match(old.closeReason, new RegExp(`time traveled to run '${traveled.runId}': start over`));
    const now = await client.describeFlow(flowId);
    assert.deepEqual([now.runId, now.status, now.traveledFromRunId], [traveled.runId, "RUNNING", started.runId]);
    await client.publishToChannel(flowId, go, ["now"], { runId: traveled.runId });
    const done = await client.waitForFlow(flowId, { runId: traveled.runId, timeoutMs: 30_000 });
    assert.deepEqual([done.status, done.output], ["COMPLETED", { runId: traveled.runId }]);

    const refused = async (promise: Promise<unknown>, code: string, pattern: RegExp): Promise<void> =>
      assert.rejects(promise, (e: unknown) => {
        assert.ok(e instanceof DexError, String(e));
        assert.equal(e.code, code, e.message);
        assert.match(e.message, pattern);
        return true;
      });
    // Only the latest run can be traveled from.
    await refused(client.timeTravel(flowId, started.runId, { beginning: true }), "FAILED_PRECONDITION", /is not the latest run/);
    await refused(client.timeTravel(flowId, traveled.runId, { stepType: "Refund" }), "NOT_FOUND", /no execution of Step type 'Refund'/);
    await refused(client.timeTravel(flowId, traveled.runId, { stepExecutionId: "Hold-9" }), "NOT_FOUND", /no Step execution 'Hold-9'/);
    await refused(client.timeTravel(`${flowId}-none`, "r-1", { beginning: true }), "NOT_FOUND", /no Flow with ID/);
  });
});
