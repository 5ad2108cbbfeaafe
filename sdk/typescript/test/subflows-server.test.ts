// SubFlows, the Flow retry policy and the timeout handler against a real
// dex-server-zd dev: a parent whose three SubFlows (AllOf) are summed by its
// execute; an AnyOf that a Timer wins while the child keeps running; a run
// retried once that completes, which waitForFlow answers; flow timeouts that
// the Flow's handler decides (fail, a cleanup Step, a handler that fails).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Attribute,
  Channel,
  Client,
  Flow,
  SubFlow,
  Timer,
  Wait,
  Worker,
  TaskError,
  forceComplete,
  forceFail,
  goTo,
  gracefulComplete,
  type Step,
  type TimeoutContext,
} from "../src/index";
import { DevServer, eventually, MemoryLogger } from "./helpers";

// The child: doubles its input, or waits for a "go" first when asked to.
const go = new Channel<string>("go");
const double: Step<{ n: number; hold?: boolean }> = {
  type: "Double",
  waitFor: (ctx) => (ctx.input.hold === true ? Wait.anyOf(go.forOne()) : Wait.skip()),
  execute: (ctx) => gracefulComplete(ctx.input.n * 2),
};
const CHILD = new Flow({ type: "ts-sub-child", startStep: double, steps: [double], channels: [go] });
const doubled = new SubFlow<{ n: number; hold?: boolean }, number>(CHILD);

// Three children at once; execute sums what they returned.
const fan: Step<number[]> = {
  type: "Fan",
  waitFor: (ctx) => Wait.allOf(...ctx.input.map((n, i) => doubled.start({ n }, { id: `c${i}` }))),
  execute(ctx) {
    const children = doubled.results(ctx);
    return gracefulComplete({
      sum: children.reduce((s, c) => s + (c.output ?? 0), 0),
      children: children.map((c) => [c.conditionId, c.flowId, c.status]),
    });
  },
};
const SUM = new Flow({ type: "ts-sub-sum", startStep: fan, steps: [fan] });

// A child that waits for "go" races a short Timer.
const race: Step = {
  type: "Race",
  waitFor: () => Wait.anyOf(doubled.start({ n: 5, hold: true }, { id: "child" }), Timer.after(300, "late")),
  execute(ctx) {
    const c = ctx.subFlow("child");
    return gracefulComplete({ timer: ctx.fired("late"), childFired: c.fired, child: c.flowId, status: c.status });
  },
};
const RACE = new Flow({ type: "ts-sub-race", startStep: race, steps: [race] });

// Fails its Flow ID's first run, completes the second.
const firstRuns = new Set<string>();
const flaky: Step = {
  type: "Flaky",
  execute(ctx) {
    if (!firstRuns.has(ctx.flowId)) {
      firstRuns.add(ctx.flowId);
      return forceFail(`run ${ctx.runId} fails on purpose`);
    }
    return gracefulComplete({ runId: ctx.runId, flowAttempt: ctx.flowAttempt });
  },
};
const RETRY = new Flow({ type: "ts-retry-once", startStep: flaky, steps: [flaky] });

describe("SubFlows and Flow retry on a dex server", () => {
  let server: DevServer;
  let worker: Worker;
  let client: Client;

  before(async () => {
    server = await DevServer.start();
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger(), maxConcurrentTasks: 8 });
    for (const flow of [CHILD, SUM, RACE, RETRY]) worker.host(flow);
    void worker.run();
    await worker.ready();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
  });

  after(async () => {
    client.close();
    await worker.shutdown();
    await server.stop();
  });

  test("a parent waits for three SubFlows (AllOf) and its execute sums their outputs", async () => {
    const flowId = `sum-${process.pid}`;
    await client.startFlow(SUM, flowId, [1, 2, 3]);
    const run = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    assert.equal(run.status, "COMPLETED", run.closeReason);
    assert.deepEqual(run.output, {
      sum: 12,
      children: [0, 1, 2].map((i) => [`c${i}`, `${flowId}/Fan-1/${i}`, "COMPLETED"]),
    });
    for (let i = 0; i < 3; i++) {
      const child = await client.describeFlow(`${flowId}/Fan-1/${i}`);
      assert.deepEqual([child.flowType, child.status, child.output, child.runId], ["ts-sub-child", "COMPLETED", (i + 1) * 2, run.runId]);
    }
    const kinds: string[] = [];
    for await (const e of client.iterateHistoryEvents(flowId)) kinds.push(e.kind);
    assert.equal(kinds.filter((k) => k === "SUB_FLOW_STARTED").length, 3, kinds.join(" "));
    assert.equal(kinds.filter((k) => k === "SUB_FLOW_CLOSED").length, 3, kinds.join(" "));
  });

  test("in an AnyOf that a Timer wins the child keeps running, and its end changes nothing in the parent", async () => {
    const flowId = `race-${process.pid}`;
    await client.startFlow(RACE, flowId);
    const run = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    const childId = `${flowId}/Race-1/0`;
    assert.equal(run.status, "COMPLETED", run.closeReason);
    assert.deepEqual(run.output, { timer: true, childFired: false, child: childId, status: "RUNNING" });
    assert.equal((await client.describeFlow(childId)).status, "RUNNING");
    const parentEvents = (await client.getHistoryEvents(flowId)).events.length;

    await client.publishToChannel(childId, go, ["now"]);
    const child = await client.waitForFlow(childId, { timeoutMs: 30_000 });
    assert.deepEqual([child.status, child.output], ["COMPLETED", 10]);
    const parent = await client.describeFlow(flowId);
    assert.deepEqual([parent.status, parent.output], ["COMPLETED", run.output]);
    assert.equal((await client.getHistoryEvents(flowId)).events.length, parentEvents, "the parent's history did not grow");
  });

  test("a run that fails is retried once as a new run, and waitForFlow answers the second run", async () => {
    const flowId = `retry-${process.pid}`;
    const started = await client.startFlow(RETRY, flowId, null, { retryPolicy: { maximumAttempts: 2, initialIntervalMs: 200 } });
    const run = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    assert.equal(run.status, "COMPLETED", run.closeReason);
    assert.notEqual(run.runId, started.runId);
    assert.deepEqual(run.output, { runId: run.runId, flowAttempt: 2 });
    assert.deepEqual([run.runs, run.flowAttempt, run.previousRunId, run.nextRunId], [2, 2, started.runId, ""]);

    const first = await client.describeFlow(flowId, { runId: started.runId });
    assert.deepEqual([first.status, first.flowAttempt, first.nextRunId], ["FAILED", 1, run.runId]);
    assert.match(first.closeReason, /fails on purpose/);
  });
});

// A run that stalls until its flow timeout, which the Flow's handler decides.
const note = Attribute.string("note");
const stall: Step<{ order: number }> = { type: "Stall", waitFor: () => Wait.anyOf(Timer.after(600_000)), execute: () => forceFail("the Timer fired") };
const cleanup: Step<{ order: number; why: string }> = {
  type: "Cleanup",
  execute: (ctx) => forceComplete({ cleaned: ctx.input.order, why: ctx.input.why, note: note.get(ctx) }),
};
const HANDLED = new Flow({
  type: "ts-timeout-handled",
  startStep: stall,
  steps: [stall, cleanup],
  attributes: [note],
  async handleTimeout(ctx: TimeoutContext<{ order: number; mode: string }>) {
    if (ctx.input.mode === "goTo") await new Promise((resolve) => setTimeout(resolve, 800)); // GetFlowState shows it meanwhile
    note.set(ctx, `handled ${ctx.input.order} in attempt ${ctx.attempt}`);
    if (ctx.input.mode === "fail") return forceFail("the deadline passed; the handler failed the run");
    if (ctx.input.mode === "throw") throw new TaskError("the handler gives up", { nonRetryable: true });
    return goTo(cleanup, { order: ctx.input.order, why: "timeout" });
  },
});

describe("the timeout handler on a dex server", () => {
  let server: DevServer;
  let worker: Worker;
  let client: Client;

  before(async () => {
    server = await DevServer.start();
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(HANDLED);
    void worker.run();
    await worker.ready();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
  });

  after(async () => {
    client.close();
    await worker.shutdown();
    await server.stop();
  });

  const kinds = async (flowId: string): Promise<string[]> => {
    const out: string[] = [];
    for await (const e of client.iterateHistoryEvents(flowId)) out.push(e.kind);
    return out;
  };

  test("with a flow timeout the handler runs once (policy HANDLER by default), writes an Attribute and fails the run", async () => {
    const flowId = `handled-fail-${process.pid}`;
    await client.startFlow(HANDLED, flowId, { order: 1, mode: "fail" }, { flowTimeoutMs: 400 });
    const run = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    assert.deepEqual([run.status, run.closeReason], ["FAILED", "the deadline passed; the handler failed the run"]);
    assert.equal((await client.getAttributes(flowId)).get(note), "handled 1 in attempt 1");
    const seen = await kinds(flowId);
    assert.equal(seen.filter((k) => k === "TIMEOUT_HANDLER_STARTED").length, 1, seen.join(" "));
    assert.equal(seen.filter((k) => k === "TIMEOUT_HANDLER_COMPLETED").length, 1, seen.join(" "));
  });

  test("getFlowState shows the running handler; its goTo starts a Step that completes the run with what the handler wrote", async () => {
    const flowId = `handled-goto-${process.pid}`;
    await client.startFlow(HANDLED, flowId, { order: 2, mode: "goTo" }, { flowTimeoutMs: 400 });
    await eventually("the handler running", async () => (await client.getFlowState(flowId)).timeoutHandler?.taskState === "RUNNING");
    const state = await client.getFlowState(flowId);
    assert.deepEqual([state.timeoutHandler?.stepExecutionId, state.timeoutHandler?.method, state.timeoutHandler?.attempt], ["timeout", "ON_TIMEOUT", 1]);
    assert.deepEqual(state.active.map((a) => a.stepExecutionId), ["Stall-1"], "the Steps keep running beside it");
    const run = await client.waitForFlow(flowId, { timeoutMs: 30_000 });
    assert.equal(run.status, "COMPLETED", run.closeReason);
    assert.deepEqual(run.output, { cleaned: 2, why: "timeout", note: "handled 2 in attempt 1" });
  });

  test("a handler that fails for good ends the run TIMED_OUT; policy 'fail' does not run it", async () => {
    const thrown = `handled-throw-${process.pid}`;
    await client.startFlow(HANDLED, thrown, { order: 3, mode: "throw" }, { flowTimeoutMs: 400 });
    const run = await client.waitForFlow(thrown, { timeoutMs: 30_000 });
    assert.equal(run.status, "TIMED_OUT", run.closeReason);
    assert.ok((await kinds(thrown)).includes("TIMEOUT_HANDLER_FAILED"));

    const plain = `handled-plain-${process.pid}`;
    await client.startFlow(HANDLED, plain, { order: 4, mode: "fail" }, { flowTimeoutMs: 400, timeoutPolicy: "fail" });
    const timedOut = await client.waitForFlow(plain, { timeoutMs: 30_000 });
    assert.equal(timedOut.status, "TIMED_OUT");
    assert.equal((await client.getAttributes(plain)).get(note), undefined);
    assert.equal((await kinds(plain)).includes("TIMEOUT_HANDLER_STARTED"), false);
  });
});
