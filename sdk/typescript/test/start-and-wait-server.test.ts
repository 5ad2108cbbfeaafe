// Client.startFlowAndWait against a real dex-server-zd dev (StartFlow with
// waitTimeoutMs; issue 30, "Round trips"): a short run resolves in one call
// with its output; a run that outlives the wait rejects with a
// FlowWaitTimeoutError naming the run, which goes on; a repeat with the same
// request ID waits for the run the first start made; a run that continues as
// new is waited past to its chain's last run.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Attribute, Channel, Client, FlowWaitTimeoutError, Flow, Wait, goTo, gracefulComplete, type Step } from "../src/index";
import { startLiveStack, type LiveStack } from "./live-stack";

const echo: Step<{ n: number }> = { type: "Echo", execute: (ctx) => gracefulComplete(ctx.input) };
const ECHO = new Flow({ type: "ts-saw-echo", startStep: echo, steps: [echo] });

const go = new Channel<string>("go");
const gate: Step<{ g: number }> = {
  type: "Gate",
  waitFor: () => Wait.anyOf(go.forOne()),
  execute: (ctx) => gracefulComplete(ctx.input),
};
const GATED = new Flow({ type: "ts-saw-gated", startStep: gate, steps: [gate], channels: [go] });

// Continues as new at each of its first `hops` Steps, then completes with its run ID.
const hop = Attribute.int64("hop");
const hopStep: Step<{ hops: number }> = {
  type: "Hop",
  execute(ctx) {
    const done = hop.get(ctx) ?? 0;
    if (done >= ctx.input.hops) return gracefulComplete({ runId: ctx.runId });
    hop.set(ctx, done + 1);
    return goTo(hopStep, ctx.input).continueAsNew();
  },
};
const HOPS = new Flow({ type: "ts-saw-hops", startStep: hopStep, steps: [hopStep], attributes: [hop] });

describe("startFlowAndWait on a dex server", () => {
  let stack: LiveStack;
  let client: Client;

  before(async () => {
    stack = await startLiveStack(ECHO, GATED, HOPS);
    client = stack.client;
  });

  after(async () => {
    await stack?.stop();
  });

  test("a short run resolves closed with its output in one call", async () => {
    const flowId = `saw-echo-${process.pid}`;
    const done = await client.startFlowAndWait(ECHO, flowId, { n: 7 }, { waitTimeoutMs: 30_000 });
    assert.equal(done.flowId, flowId);
    assert.equal(done.alreadyStarted, false);
    assert.equal(done.flow.runId, done.runId);
    assert.equal(done.flow.status, "COMPLETED", done.flow.closeReason);
    assert.deepEqual(done.flow.output, { n: 7 });
    // Without a limit too.
    const unbounded = await client.startFlowAndWait(ECHO, `${flowId}-2`, { n: 8 });
    assert.deepEqual(unbounded.flow.output, { n: 8 });
  });

  test("a run that outlives the wait rejects with a FlowWaitTimeoutError naming the run, and goes on", async () => {
    const flowId = `saw-gated-${process.pid}`;
    const t0 = Date.now();
    const error = await client.startFlowAndWait(GATED, flowId, { g: 1 }, { waitTimeoutMs: 300 }).then(
      () => assert.fail("resolved"),
      (e: unknown) => e,
    );
    assert.ok(error instanceof FlowWaitTimeoutError, String(error));
    assert.ok(Date.now() - t0 >= 250, `${Date.now() - t0} ms`);
    assert.equal(error.flow.status, "RUNNING");
    assert.notEqual(error.flow.runId, "");
    await client.publishToChannel(flowId, go, ["now"]);
    const closed = await client.waitForFlow(flowId, { runId: error.flow.runId, timeoutMs: 30_000 });
    assert.deepEqual(closed.output, { g: 1 });
  });

  test("a repeat with the same request ID starts nothing and waits for the first start's run", async () => {
    const flowId = `saw-repeat-${process.pid}`;
    const options = { requestId: `saw-req-${process.pid}`, ignoreAlreadyStarted: true };
    const first = await client.startFlow(GATED, flowId, { g: 2 }, options);
    const waiting = client.startFlowAndWait(GATED, flowId, { g: 99 }, { ...options, waitTimeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 200));
    await client.publishToChannel(flowId, go, ["now"]);
    const done = await waiting;
    assert.equal(done.alreadyStarted, true);
    assert.equal(done.runId, first.runId);
    assert.equal(done.flow.status, "COMPLETED");
    assert.deepEqual(done.flow.output, { g: 2 });
    assert.equal(done.flow.runs, 1);
  });

  test("a run that continues as new is waited past to its chain's last run", async () => {
    const done = await client.startFlowAndWait(HOPS, `saw-hops-${process.pid}`, { hops: 2 }, { waitTimeoutMs: 30_000 });
    assert.equal(done.flow.status, "COMPLETED", done.flow.closeReason);
    assert.equal(done.flow.runId, `${done.runId}.c2`);
    assert.deepEqual(done.flow.output, { runId: `${done.runId}.c2` });
  });
});
