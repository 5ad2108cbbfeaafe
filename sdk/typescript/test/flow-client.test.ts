// The Client's dex Flow calls and the Worker's Flow tasks against a real
// `dex-server-zd dev`: start options (request IDs, ID reuse, start delay, run
// timeout), stop modes, publishes to a Channel and a ChannelMap instance,
// AnyCombinationOf with locals, SkipTimer, GoToMulti with an options override
// and canceled siblings, ForceCompleteIfChannelsEmpty, the state with a
// retrying attempt's last failure, history pages and waits, Step completion
// waits, heartbeats and cancellation, and bad input.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Channel,
  ChannelMap,
  Client,
  DexError,
  Flow,
  FlowWaitTimeoutError,
  Timer,
  Wait,
  Worker,
  deadEnd,
  forceCompleteIfChannelsEmpty,
  goTo,
  goToMulti,
  gracefulComplete,
  type Step,
  type StepContext,
} from "../src/index";
import { DevServer, eventually, MemoryLogger } from "./helpers";

interface LabInput {
  mode: "wait" | "fan" | "undeclared" | "retrying" | "beat" | "drain" | "sleep" | "raw-empty" | "raw-no-ids";
  key?: string;
}

const signals = new Channel<string>("signals");
const inbox = new ChannelMap<{ n: number }>("inbox");
let beatAborted = false;

const start: Step<LabInput> = {
  type: "Start",
  options: { execute: { retry: { initialIntervalMs: 60_000, maximumAttempts: 3 } } },
  execute(ctx) {
    switch (ctx.input.mode) {
      case "wait":
        return goTo("Gate", ctx.input);
      case "fan":
        return goToMulti({ step: "Slow", input: 1 }, { step: "Fast", input: 2, options: { execute: { attemptTimeoutMs: 5_000 } } });
      case "undeclared":
        return goTo("Nowhere");
      case "retrying":
        throw new Error(`not yet (attempt ${ctx.attempt})`);
      case "beat":
        return goTo("Beat");
      case "drain":
        return goTo("Drain");
      case "sleep":
        return goTo("Slow");
      case "raw-empty":
        return goTo("RawEmpty");
      case "raw-no-ids":
        return goTo("RawNoIds");
    }
  },
};

class Gate implements Step<LabInput> {
  readonly type = "Gate";
  waitFor(ctx: StepContext<LabInput>) {
    ctx.setLocal("key", ctx.input.key);
    const box = inbox.instance(ctx.input.key ?? "none");
    return Wait.anyCombinationOf(
      [["sig", "box"], ["skip"]],
      signals.forOne("sig"),
      box.forN(2, "box"),
      Timer.after(600_000, "skip"),
    );
  }
  execute(ctx: StepContext<LabInput>) {
    const key = ctx.getLocal<string>("key") ?? "none";
    return gracefulComplete({
      key,
      timer: ctx.timerFired(),
      skipped: ctx.conditions.find((c) => c.id === "skip")?.skipped ?? false,
      sig: ctx.messages(signals),
      box: ctx.messages(inbox.instance(key)),
    });
  }
}

const slow: Step<number> = {
  type: "Slow",
  waitFor: () => Wait.anyOf(Timer.after(600_000)),
  execute: () => deadEnd(),
};

const fast: Step<number> = {
  type: "Fast",
  execute: (ctx) => gracefulComplete({ fast: ctx.input, timeout: ctx.attemptTimeoutMs }).cancelSiblings(),
};

const beat: Step = {
  type: "Beat",
  options: { execute: { heartbeatTimeoutMs: 3_000, retry: { maximumAttempts: 1 } } },
  async execute(ctx) {
    const end = Date.now() + 20_000;
    while (!ctx.signal.aborted && Date.now() < end) {
      ctx.heartbeat();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    beatAborted = ctx.signal.aborted;
    return deadEnd();
  },
};

const drain: Step = {
  type: "Drain",
  execute: () => forceCompleteIfChannelsEmpty({ channels: [signals], output: "drained", otherwise: [{ step: "Eat" }] }),
};

const eat: Step = {
  type: "Eat",
  waitFor: () => Wait.anyOf(signals.atMost(1)),
  execute: () => goTo("Drain"),
};

// Waits the builders refuse, made by editing a built Wait: the server's own
// check refuses the result and the attempt counts as FAILED with its reason.
const rawRetry = { waitFor: { retry: { maximumAttempts: 2, initialIntervalMs: 50 } } };
const rawEmpty: Step = {
  type: "RawEmpty",
  options: rawRetry,
  waitFor: () => {
    const w = Wait.skip();
    (w.spec as { kind: string }).kind = "ANY_OF";
    return w;
  },
  execute: () => deadEnd(),
};
const rawNoIds: Step = {
  type: "RawNoIds",
  options: rawRetry,
  waitFor: () => {
    const w = Wait.anyOf(Timer.after(1), Timer.after(2));
    Object.assign(w.spec, { kind: "ANY_COMBINATION_OF", combinations: [{ conditionIds: ["x"] }] });
    return w;
  },
  execute: () => deadEnd(),
};

const lab = new Flow({
  type: "TsLab",
  startStep: start,
  steps: [start, new Gate(), slow, fast, beat, drain, eat, rawEmpty, rawNoIds],
  channels: [signals, inbox],
});

describe("dex Flows: Client calls and Worker tasks", () => {
  let server: DevServer;
  let client: Client;
  let worker: Worker;
  const logger = new MemoryLogger();

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
    worker = new Worker({ addresses: [server.address], logger, shutdownTimeoutMs: 2_000 });
    worker.host(lab);
    void worker.run();
    await worker.ready();
  });
  after(async () => {
    client?.close();
    await worker?.shutdown();
    await server?.stop();
  });

  test("start: request IDs make a repeat answer the run; ID reuse policies; a refused start", async () => {
    const first = await client.startFlow(lab, "reuse-1", { mode: "sleep" }, { requestId: "req-1", ignoreAlreadyStarted: true });
    assert.equal(first.alreadyStarted, false);
    assert.match(first.runId, /^[0-9a-f]+$/);
    const again = await client.startFlow("TsLab", "reuse-1", { mode: "sleep" }, { requestId: "req-1", ignoreAlreadyStarted: true });
    assert.deepEqual(again, { flowId: "reuse-1", runId: first.runId, alreadyStarted: true });
    await assert.rejects(client.startFlow(lab, "reuse-1", { mode: "sleep" }), (e: unknown) => e instanceof DexError && e.code === "ALREADY_EXISTS");
    const replaced = await client.startFlow(lab, "reuse-1", { mode: "sleep" }, { idReusePolicy: "terminateIfRunning" });
    assert.notEqual(replaced.runId, first.runId);
    const old = await client.describeFlow("reuse-1", { runId: first.runId });
    assert.equal(old.status, "TERMINATED");
    const now = await client.describeFlow("reuse-1");
    assert.equal(now.runId, replaced.runId);
    assert.equal(now.runs, 2);
    assert.equal(now.flowType, "TsLab");
    assert.deepEqual(now.input, { mode: "sleep" });
    await assert.rejects(
      client.startFlow("NoSuchType", "x-1"),
      (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT",
    );
    await assert.rejects(client.startFlow(lab, "bad\nid"), /control character/);
  });

  test("stop: cancel, terminate, fail with a reason; a second stop is FAILED_PRECONDITION, a repeat (its request ID) OK", async () => {
    for (const [mode, status] of [
      ["cancel", "CANCELED"],
      ["terminate", "TERMINATED"],
      ["fail", "FAILED"],
    ] as const) {
      const id = `stop-${mode}`;
      await client.startFlow(lab, id, { mode: "sleep" });
      await client.stopFlow(id, { mode, reason: `stopped by ${mode}`, requestId: `stop-${mode}-1` });
      const closed = await client.waitForFlow(id, { timeoutMs: 5_000 });
      assert.equal(closed.status, status);
      if (mode === "fail") assert.match(closed.closeReason, /stopped by fail/);
      await assert.rejects(client.stopFlow(id), (e: unknown) => e instanceof DexError && e.code === "FAILED_PRECONDITION");
      // A repeat of the stop that landed (a lost answer) answers OK and changes nothing.
      await client.stopFlow(id, { mode: "terminate", requestId: `stop-${mode}-1` });
      assert.equal((await client.describeFlow(id)).status, status);
    }
    await assert.rejects(client.stopFlow("no-such-flow"), (e: unknown) => e instanceof DexError && e.code === "NOT_FOUND");
  });

  test("AnyCombinationOf over a Channel, a ChannelMap instance and a Timer, with locals; state, history, publishes", async () => {
    const id = "gate-1";
    await client.startFlow(lab, id, { mode: "wait", key: "ann" });
    assert.equal((await client.waitForStepCompletion(id, "Start-1", { timeoutMs: 10_000 })).completed, true);
    await eventually("Gate-1 waiting", async () => (await client.getFlowState(id)).active.some((a) => a.phase === "WAITING"));
    await client.publishToChannel(id, inbox.instance("ann"), [{ n: 1 }]);
    await client.publishToChannel(id, "signals", ["go"]);
    const state = await client.getFlowState(id);
    assert.deepEqual(state.workers, [worker.workerId]);
    const gate = state.active.find((a) => a.stepExecutionId === "Gate-1");
    assert.equal(gate?.phase, "WAITING", JSON.stringify(state));
    assert.deepEqual(
      gate?.conditions.map((c) => [c.condition.id, c.queued]),
      [
        ["sig", 1],
        ["box", 1],
        ["skip", 0],
      ],
    );
    // The queued messages per queue (a ChannelMap instance, a Channel) with their sequence numbers; the start Step ended.
    assert.deepEqual(
      state.queues.map((q) => [q.channel, q.instanceKey, q.count, q.messages.map((m) => [m.seq, m.value, m.omittedBytes])]),
      [
        ["inbox", "ann", 1, [[0, { n: 1 }, 0]]],
        ["signals", "", 1, [[0, "go", 0]]],
      ],
    );
    assert.equal(state.queuesOmitted, 0);
    assert.deepEqual(
      state.ended.map((e) => [e.stepExecutionId, e.phase, e.method]),
      [["Start-1", "DONE", "EXECUTE"]],
    );
    assert.equal(state.endedCount, 1);
    await client.publishToChannel(id, inbox, [{ n: 2 }, { n: 3 }], { instanceKey: "ann" });
    const done = await client.waitForFlow(id, { timeoutMs: 10_000 });
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.output, { key: "ann", timer: false, skipped: false, sig: ["go"], box: [{ n: 1 }, { n: 2 }] });
    const events = [];
    for await (const e of client.iterateHistoryEvents(id, { pageSize: 2 })) events.push(e);
    const kinds = events.map((e) => e.kind);
    assert.equal(kinds[0], "FLOW_STARTED");
    assert.equal(kinds[kinds.length - 1], "FLOW_CLOSED");
    assert.equal(events[events.length - 1]?.status, "COMPLETED");
    const published = events.filter((e) => e.kind === "CHANNEL_PUBLISHED").map((e) => e.publish);
    assert.deepEqual(published, [
      { channel: "inbox", instanceKey: "ann", messages: [{ n: 1 }] },
      { channel: "signals", instanceKey: "", messages: ["go"] },
      { channel: "inbox", instanceKey: "ann", messages: [{ n: 2 }, { n: 3 }] },
    ]);
    const waited = events.find((e) => e.kind === "WAIT_FOR_COMPLETED");
    assert.equal(waited?.wait?.kind, "ANY_COMBINATION_OF");
    assert.deepEqual(waited?.wait?.combinations, [["sig", "box"], ["skip"]]);
    const met = events.find((e) => e.kind === "WAIT_COMPLETED");
    assert.deepEqual(met?.conditions.filter((c) => c.fired).map((c) => c.id), ["sig", "box"]);
    const decided = events.find((e) => e.kind === "EXECUTE_COMPLETED" && e.stepExecutionId === "Start-1");
    assert.equal(decided?.decision?.kind, "goTo");
    // Publishing to an undeclared Channel, or to a closed run.
    await assert.rejects(client.publishToChannel(id, "nope", [1]), (e: unknown) => e instanceof DexError);
  });

  test("skipRunTimer fires a run's start delay, then its flow timeout, now", async () => {
    const id = "skip-run-1";
    await client.startFlow(lab, id, { mode: "wait", key: "ann" }, { startDelayMs: 3_600_000, flowTimeoutMs: 7_200_000 });
    assert.equal((await client.getFlowState(id)).active.length, 0);
    await client.skipRunTimer(id, "startDelay");
    await eventually("Start-1 created", async () => (await client.getFlowState(id)).active.length > 0 || (await client.describeFlow(id)).status !== "RUNNING");
    await client.skipRunTimer(id, "flowTimeout");
    assert.equal((await client.describeFlow(id)).status, "TIMED_OUT");
    await assert.rejects(client.skipRunTimer(id, "flowTimeout"), (e: unknown) => e instanceof DexError && e.code === "FAILED_PRECONDITION");
    await assert.rejects(client.skipRunTimer(id, "soon" as "flowTimeout"), (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT");
  });

  test("SkipTimer fires a waiting Timer now; waitForHistoryEvent sees it", async () => {
    const id = "skip-1";
    await client.startFlow(lab, id, { mode: "wait", key: "bob" });
    await eventually("Gate-1 waiting", async () => (await client.getFlowState(id)).active.some((a) => a.phase === "WAITING"));
    const seen = await client.getHistoryEvents(id);
    const last = seen.events[seen.events.length - 1]?.seq ?? 0;
    const next = client.waitForHistoryEvent(id, { afterSeq: last, timeoutMs: 10_000 });
    await client.skipTimer(id, "Gate-1", "skip", { requestId: "skip-1-gate" });
    const page = await next;
    assert.equal(page.events[0]?.kind, "TIMER_SKIPPED");
    const done = await client.waitForFlow(id, { timeoutMs: 10_000 });
    assert.deepEqual(done.output, { key: "bob", timer: true, skipped: true, sig: [], box: [] });
    await assert.rejects(client.skipTimer(id, "Gate-1", 2), (e: unknown) => e instanceof DexError && (e.code === "FAILED_PRECONDITION" || e.code === "NOT_FOUND"));
    // A repeat of the skip that landed answers OK, though the run closed since, and adds nothing.
    await client.skipTimer(id, "Gate-1", "skip", { requestId: "skip-1-gate" });
    const skips = (await client.getHistoryEvents(id, { pageSize: 1_000 })).events.filter((e) => e.kind === "TIMER_SKIPPED");
    assert.equal(skips.length, 1);
    // A wait that times out answers an empty page.
    const quiet = await client.waitForHistoryEvent(id, { afterSeq: 10_000, timeoutMs: 200 });
    assert.deepEqual(quiet.events, []);
  });

  test("GoToMulti with an options override; cancelSiblings cancels the slow branch", async () => {
    const id = "fan-1";
    await client.startFlow(lab, id, { mode: "fan" });
    const done = await client.waitForFlow(id, { timeoutMs: 10_000 });
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.output, { fast: 2, timeout: 5_000 });
    const slowDone = await client.waitForStepCompletion(id, "Slow-1", { timeoutMs: 1_000 });
    assert.deepEqual(slowDone, { completed: true, phase: "CANCELED" });
  });

  test("ForceCompleteIfChannelsEmpty loops until the Channel is drained; a start delay", async () => {
    const id = "drain-1";
    const t0 = Date.now();
    await client.startFlow(lab, id, { mode: "drain" }, { startDelayMs: 500 });
    await client.publishToChannel(id, signals, ["a", "b", "c"]);
    const done = await client.waitForFlow(id, { timeoutMs: 10_000 });
    assert.equal(done.status, "COMPLETED");
    assert.equal(done.output, "drained");
    assert.ok(done.closedAt - done.startedAt >= 450, `the start delay: ${done.closedAt - done.startedAt} ms`);
    assert.ok(Date.now() - t0 >= 450);
    const eats = [];
    for await (const e of client.iterateHistoryEvents(id)) if (e.kind === "EXECUTE_COMPLETED" && e.stepExecutionId.startsWith("Eat")) eats.push(e);
    assert.equal(eats.length, 3);
  });

  test("a retrying attempt's last failure shows in the state; an undeclared Step fails the run with a clear reason", async () => {
    await client.startFlow(lab, "retrying-1", { mode: "retrying" });
    await eventually("the first failure", async () => {
      const s = await client.getFlowState("retrying-1");
      return s.active[0]?.lastFailure !== undefined;
    });
    const state = await client.getFlowState("retrying-1");
    const start0 = state.active[0];
    assert.equal(start0?.taskState, "BACKOFF");
    assert.match(start0?.lastFailure?.error ?? "", /not yet \(attempt 1\)/);
    assert.ok((start0?.retryAt ?? 0) > Date.now());
    await client.stopFlow("retrying-1");

    await client.startFlow(lab, "undeclared-1", { mode: "undeclared" });
    const failed = await client.waitForFlow("undeclared-1", { timeoutMs: 10_000 });
    assert.equal(failed.status, "FAILED");
    assert.match(failed.closeReason, /decided goTo 'Nowhere', which Flow 'TsLab' does not declare/);
  });

  test("bad results the SDK did not catch: the server refuses them and the attempts count as FAILED with its reason", async () => {
    const refusedBefore = worker.stats().resultsRefused;
    for (const [mode, reason] of [
      ["raw-empty", /invalid result: the wait has no conditions/],
      ["raw-no-ids", /invalid result: condition 0 has no conditionId; AnyCombinationOf needs one on every condition/],
    ] as const) {
      await client.startFlow(lab, mode, { mode });
      const failed = await client.waitForFlow(mode, { timeoutMs: 10_000 });
      assert.equal(failed.status, "FAILED");
      assert.match(failed.closeReason, /WaitFor failed after 2 attempts/);
      assert.match(failed.closeReason, reason);
    }
    await eventually("the four refusals acknowledged", () => worker.stats().resultsRefused - refusedBefore === 4, 5_000);
  });

  test("heartbeats keep an attempt alive; a stop cancels it through the heartbeat's answer", async () => {
    beatAborted = false;
    await client.startFlow(lab, "beat-1", { mode: "beat" });
    await eventually("Beat-1 running", async () =>
      (await client.getFlowState("beat-1")).active.some((a) => a.stepType === "Beat" && a.taskState === "RUNNING"),
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    await client.stopFlow("beat-1");
    await eventually("the handler saw its signal abort", () => beatAborted, 5_000);
    assert.ok(worker.stats().heartbeatsSent > 0);
  });

  test("waitForFlow's timeout: a FlowWaitTimeoutError with the run as it is", async () => {
    await client.startFlow(lab, "slow-1", { mode: "sleep" });
    await assert.rejects(client.waitForFlow("slow-1", { timeoutMs: 300 }), (e: unknown) => {
      assert.ok(e instanceof FlowWaitTimeoutError);
      assert.equal(e.code, "DEADLINE_EXCEEDED");
      assert.equal(e.flow.status, "RUNNING");
      return true;
    });
    assert.deepEqual(await client.waitForStepCompletion("slow-1", "Slow-1", { timeoutMs: 200 }), { completed: false, phase: "WAITING" });
    await client.stopFlow("slow-1", { mode: "terminate" });
    await assert.rejects(client.describeFlow("never-started"), (e: unknown) => e instanceof DexError && e.code === "NOT_FOUND");
  });
});
