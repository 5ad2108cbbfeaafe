// Continue-as-new against a real dex-server-zd dev: a looping Step asks to
// continue as new every few loops (StepDecision.continueAsNew()) and a wait
// on the first run ID answers the last run's result; a start's config lowers
// the Flow's history threshold; a client continues a waiting run
// (Client.continueAsNew). Also what is refused before anything is sent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Attribute, Channel, Client, DexError, Flow, Wait, deadEnd, forceFail, goTo, gracefulComplete, type Step } from "../src/index";
import { startLiveStack, type LiveStack } from "./live-stack";

const loops = Attribute.int64("loops");

// Loop: input {loops, every}; every `every`-th loop continues as new; the
// last completes with the Attribute (kept through every run) and its run ID.
const loop: Step<{ loops: number; every?: number }> = {
  type: "Loop",
  execute(ctx) {
    const done = (loops.get(ctx) ?? 0) + 1;
    loops.set(ctx, done);
    if (done >= ctx.input.loops) return gracefulComplete({ loops: done, runId: ctx.runId });
    const next = goTo(loop, ctx.input);
    const every = ctx.input.every ?? 0;
    return every > 0 && done % every === 0 ? next.continueAsNew() : next;
  },
};
// A far threshold; a start may lower it.
const LOOPER = new Flow({
  type: "ts-can-looper",
  startStep: loop,
  steps: [loop],
  attributes: [loops],
  config: { continueAsNewAfterEvents: 100_000 },
});

const go = new Channel<string>("go");
const hold: Step = {
  type: "Hold",
  waitFor: () => Wait.anyOf(go.forOne()),
  execute: (ctx) => gracefulComplete({ runId: ctx.runId }),
};
const HOLD = new Flow({ type: "ts-can-hold", startStep: hold, steps: [hold], channels: [go] });

describe("continue-as-new on a dex server", () => {
  let stack: LiveStack;
  let client: Client;

  before(async () => {
    stack = await startLiveStack(LOOPER, HOLD);
    client = stack.client;
  });

  after(async () => {
    await stack?.stop();
  });

  test("a loop continuing every 3 loops ends in its fourth run, and the first run's wait answers it", async () => {
    const flowId = `can-loop-${process.pid}`;
    const first = (await client.startFlow(LOOPER, flowId, { loops: 10, every: 3 })).runId;
    const last = await client.waitForFlow(flowId, { runId: first, timeoutMs: 30_000 });
    assert.equal(last.status, "COMPLETED", last.closeReason);
    assert.equal(last.runId, `${first}.c3`);
    assert.equal(last.continuedFromRunId, `${first}.c2`);
    assert.deepEqual(last.output, { loops: 10, runId: `${first}.c3` });
    const old = await client.describeFlow(flowId, { runId: first });
    assert.equal(old.status, "CONTINUED_AS_NEW");
    assert.equal(old.nextRunId, `${first}.c1`);
    const step = await client.waitForStepCompletion(flowId, "Loop-10", { runId: first, timeoutMs: 30_000 });
    assert.equal(step.phase, "DONE");
    // The first run's history: the request, then the close.
    const kinds: string[] = [];
    for await (const e of client.iterateHistoryEvents(flowId, { runId: first })) kinds.push(e.kind);
    assert.ok(kinds.includes("CONTINUE_AS_NEW_REQUESTED"), kinds.join(","));
    const started: { continuedFromRunId: string }[] = [];
    for await (const e of client.iterateHistoryEvents(flowId, { runId: `${first}.c1` })) {
      if (e.kind === "FLOW_STARTED") started.push(e);
    }
    assert.equal(started[0]?.continuedFromRunId, first);
  });

  test("a start's config lowers the Flow's history threshold", async () => {
    const flowId = `can-config-${process.pid}`;
    const first = (await client.startFlow(LOOPER, flowId, { loops: 20 }, { config: { continueAsNewAfterEvents: 12 } })).runId;
    const last = await client.waitForFlow(flowId, { runId: first, timeoutMs: 30_000 });
    assert.equal(last.status, "COMPLETED", last.closeReason);
    assert.notEqual(last.runId, first);
    assert.notEqual(last.continuedFromRunId, "");
    assert.deepEqual((last.output as { loops: number }).loops, 20);
  });

  test("a client continues a waiting run at once; a repeat changes nothing; a closed run is refused", async () => {
    const flowId = `can-hold-${process.pid}`;
    const first = (await client.startFlow(HOLD, flowId)).runId;
    // Wait until Hold waits on its Channel (no attempt runs).
    for (let i = 0; i < 200; i++) {
      const state = await client.getFlowState(flowId);
      if (state.active[0]?.phase === "WAITING") break;
      await new Promise((r) => setTimeout(r, 25));
    }
    const done = await client.continueAsNew(flowId, first, { reason: "trim", requestId: "can-req-1" });
    assert.deepEqual(done, { newRunId: `${first}.c1`, pending: false, alreadyDone: false });
    const again = await client.continueAsNew(flowId, first, { requestId: "can-req-1" });
    assert.equal(again.alreadyDone, true);
    const latest = await client.describeFlow(flowId);
    assert.equal(latest.runId, `${first}.c1`);
    assert.equal(latest.continuedFromRunId, first);
    await client.publishToChannel(flowId, go, ["now"]);
    const closed = await client.waitForFlow(flowId, { runId: first, timeoutMs: 30_000 });
    assert.equal(closed.status, "COMPLETED");
    assert.deepEqual(closed.output, { runId: `${first}.c1` });
    await assert.rejects(client.continueAsNew(flowId, closed.runId), (e: unknown) => e instanceof DexError && e.code === "FAILED_PRECONDITION");
  });

  test("bad input is refused before anything is sent", async () => {
    await assert.rejects(client.continueAsNew("x", ""), (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT");
    assert.throws(() => forceFail("no").continueAsNew(), (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT");
    assert.equal(deadEnd().continueAsNew().continuesAsNew, true);
    assert.throws(
      () => new Flow({ type: "bad-config", startStep: loop, steps: [loop], attributes: [loops], config: { continueAsNewAfterEvents: 0 } }),
      (e: unknown) => e instanceof DexError && /continueAsNewAfterEvents/.test(e.message),
    );
    await assert.rejects(
      client.startFlow(LOOPER, "bad-start", { loops: 1 }, { config: { continueAsNewAfterBytes: -1 } }),
      (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT",
    );
  });
});
