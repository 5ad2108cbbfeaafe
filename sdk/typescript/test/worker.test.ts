// The Worker hosting dex Flows against a real dex-server-zd dev: runs of one
// and three Steps, a retried attempt, the concurrency limit, heartbeats,
// the AbortSignal (a stop, the attempt timeout, the shutdown timeout),
// TaskError and other errors, graceful shutdown and the hand-back of tasks
// that arrive during it.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Client,
  Flow,
  TaskCancelledError,
  TaskError,
  Worker,
  deadEnd,
  goTo,
  gracefulComplete,
  type Step,
  type StepContext,
  type WorkerOptions,
} from "../src/index";
import { DevServer, eventually, MemoryLogger } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A Flow of one Step type. */
function oneStep(type: string, step: Omit<Step, "type">): Flow {
  const only: Step = { type: "S", ...step };
  return new Flow({ type, startStep: only, steps: [only] });
}

/** Resolves with the signal's reason once it aborts, or undefined after `ms`. */
function aborted(signal: AbortSignal, ms: number): Promise<unknown> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(signal.reason);
    });
  });
}

describe("Worker", () => {
  let server: DevServer;
  let client: Client;
  const workers: Worker[] = [];

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
  });

  after(async () => {
    await Promise.all(workers.map((w) => w.shutdown()));
    client?.close();
    await server?.stop();
  });

  /** A Worker hosting `flows`, serving until `run` ends; ready. */
  async function newWorker(flows: Flow[], options: WorkerOptions = {}): Promise<{ worker: Worker; logger: MemoryLogger; running: Promise<void> }> {
    const logger = new MemoryLogger();
    const worker = new Worker({ addresses: [server.address], logger, shutdownTimeoutMs: 10_000, ...options });
    workers.push(worker);
    for (const flow of flows) worker.host(flow);
    const running = worker.run();
    await worker.ready(); // the hello declared the Flows
    return { worker, logger, running };
  }

  test("runs Flows of one and three Steps, retrying a failed attempt", async () => {
    const echo = oneStep("w-one", { execute: (ctx) => gracefulComplete(ctx.input) });
    const fetch: Step<{ n: number }> = { type: "Fetch", execute: (ctx) => goTo("Transform", { items: ctx.input.n + 2 }) };
    const transform: Step<{ items: number }> = {
      type: "Transform",
      options: { execute: { retry: { initialIntervalMs: 50 } } },
      execute(ctx) {
        if (ctx.attempt === 1) throw new Error("transform fails on its first attempt");
        return goTo("Store", { total: ctx.input.items * 10, transformedOnAttempt: ctx.attempt });
      },
    };
    const store: Step = { type: "Store", execute: (ctx) => gracefulComplete({ stored: ctx.input, by: ctx.scheduledBy }) };
    const three = new Flow({ type: "w-three", startStep: fetch, steps: [fetch, transform, store] });
    const { worker, running } = await newWorker([echo, three]);

    await client.startFlow(echo, "one-1", { n: 1 });
    await client.startFlow(three, "three-1", { n: 1 });
    const oneDone = await client.waitForFlow("one-1", { timeoutMs: 15_000 });
    assert.equal(oneDone.status, "COMPLETED");
    assert.deepEqual(oneDone.output, { n: 1 });
    const threeDone = await client.waitForFlow("three-1", { timeoutMs: 15_000 });
    assert.equal(threeDone.status, "COMPLETED", JSON.stringify(threeDone));
    assert.deepEqual(threeDone.output, { stored: { total: 30, transformedOnAttempt: 2 }, by: "Transform-1" });

    await worker.shutdown();
    await running;
    const stats = worker.stats();
    assert.equal(stats.streamsAccepted, 1);
    assert.equal(stats.tasksReceived, 5); // Echo; Fetch, Transform twice, Store
    assert.equal(stats.tasksFinished, 5);
    assert.equal(stats.resultsAccepted, 5);
    assert.equal(stats.running, 0);
  });

  test("never runs more than maxConcurrentTasks attempts at once", async () => {
    let now = 0;
    let most = 0;
    const flow = oneStep("w-concurrency", {
      async execute() {
        now++;
        most = Math.max(most, now);
        await sleep(100);
        now--;
        return gracefulComplete({ ok: true });
      },
    });
    const { worker, running } = await newWorker([flow], { maxConcurrentTasks: 3 });
    const ids = Array.from({ length: 12 }, (_, i) => `c-${i}`);
    await Promise.all(ids.map((id) => client.startFlow(flow, id)));
    for (const id of ids) assert.equal((await client.waitForFlow(id, { timeoutMs: 15_000 })).status, "COMPLETED");
    assert.equal(most, 3);
    await worker.shutdown();
    await running;
  });

  test("heartbeats keep a long attempt alive; an attempt without them times out", async () => {
    const flow = oneStep("w-heartbeat", {
      options: { execute: { attemptTimeoutMs: 20_000, heartbeatTimeoutMs: 400, retry: { maximumAttempts: 2, initialIntervalMs: 100 } } },
      async execute(ctx: StepContext<{ beat: boolean }>) {
        const beat = ctx.input.beat || ctx.attempt > 1;
        for (let i = 0; i < 12; i++) {
          if (beat) assert.equal(ctx.heartbeat(), true);
          await sleep(100);
        }
        return gracefulComplete({ attempt: ctx.attempt });
      },
    });
    const { worker, running } = await newWorker([flow]);
    await client.startFlow(flow, "beating", { beat: true });
    await client.startFlow(flow, "silent", { beat: false });
    const beatDone = await client.waitForFlow("beating", { timeoutMs: 15_000 });
    assert.equal(beatDone.status, "COMPLETED");
    assert.deepEqual(beatDone.output, { attempt: 1 });
    // The silent attempt passes its 400 ms heartbeat timeout; the retry heartbeats.
    const silentDone = await client.waitForFlow("silent", { timeoutMs: 15_000 });
    assert.equal(silentDone.status, "COMPLETED");
    assert.deepEqual(silentDone.output, { attempt: 2 });
    // The timed-out attempt's late result is refused as stale and dropped.
    await eventually("the stale result's ack", () => worker.stats().resultsRefused === 1);
    assert.ok(worker.stats().heartbeatsSent >= 20, `${worker.stats().heartbeatsSent} heartbeats`);
    await worker.shutdown();
    await running;
  });

  test("stopping the run aborts the attempt's AbortSignal (seen through a heartbeat)", async () => {
    let started = false;
    let reason: unknown;
    const flow = oneStep("w-cancel", {
      options: { execute: { attemptTimeoutMs: 30_000 } },
      async execute(ctx) {
        started = true;
        // Heartbeat until the server says stop; bounded.
        for (let i = 0; i < 200 && !ctx.signal.aborted; i++) {
          ctx.heartbeat();
          await sleep(50);
        }
        reason = ctx.signal.reason;
        throw ctx.signal.reason;
      },
    });
    const { worker, running } = await newWorker([flow]);
    await client.startFlow(flow, "cancel-1");
    await eventually("the attempt to start", () => started);
    const t0 = Date.now();
    await client.stopFlow("cancel-1");
    await eventually("the attempt to see the stop", () => reason !== undefined, 5_000);
    assert.ok(Date.now() - t0 < 2_000);
    assert.ok(reason instanceof TaskCancelledError);
    assert.equal(reason.reason, "cancel-requested");
    assert.match(reason.message, /run was stopped/);
    await worker.shutdown();
    await running;
    assert.equal((await client.describeFlow("cancel-1")).status, "CANCELED");
  });

  test("the attempt timeout aborts the signal", async () => {
    let reason: unknown;
    const flow = oneStep("w-deadline", {
      options: { execute: { attemptTimeoutMs: 300, retry: { maximumAttempts: 1 } } },
      async execute(ctx) {
        reason = await aborted(ctx.signal, 5_000);
        // Past the server's own timeout too (it may end the attempt a little
        // after the deadline, and a result before that is still accepted).
        await sleep(1_000);
        return deadEnd();
      },
    });
    const { worker, running } = await newWorker([flow]);
    await client.startFlow(flow, "deadline-1");
    const done = await client.waitForFlow("deadline-1", { timeoutMs: 10_000 });
    assert.equal(done.status, "FAILED");
    assert.match(done.closeReason, /S-1 Execute failed after 1 attempt: the attempt timeout of 300ms passed/);
    await eventually("the attempt to see its deadline", () => reason !== undefined, 5_000);
    assert.ok(reason instanceof TaskCancelledError && reason.reason === "attempt-timeout", String(reason));
    await worker.shutdown();
    await running;
  });

  test("TaskError: non-retryable fails the run at once, retryable is retried, other errors are retryable", async () => {
    const attempts = new Map<string, number>();
    const step: Step<{ mode: string }> = {
      type: "S",
      options: { execute: { retry: { maximumAttempts: 3, initialIntervalMs: 50 } } },
      execute(ctx) {
        const { mode } = ctx.input;
        attempts.set(mode, ctx.attempt);
        if (mode === "fatal") throw new TaskError("the order does not exist", { nonRetryable: true });
        if (mode === "retry" && ctx.attempt < 3) throw new TaskError(`busy on attempt ${ctx.attempt}`);
        if (mode === "type-error") (undefined as unknown as () => void)();
        if (mode === "always") throw new Error("it never works");
        return gracefulComplete({ mode, attempt: ctx.attempt }); // a synchronous execute is fine too
      },
    };
    // The TypeError is retried after a minute: its last failure stays in the state meanwhile.
    const start: Step<{ mode: string }> = {
      type: "Start",
      execute: (ctx) =>
        goTo(step, ctx.input, ctx.input.mode === "type-error" ? { execute: { retry: { initialIntervalMs: 60_000 } } } : undefined),
    };
    const flow = new Flow({ type: "w-failures", startStep: start, steps: [start, step] });
    const { worker, running } = await newWorker([flow]);
    for (const mode of ["fatal", "retry", "type-error", "always"]) await client.startFlow(flow, `fail-${mode}`, { mode });

    const fatal = await client.waitForFlow("fail-fatal", { timeoutMs: 10_000 });
    assert.equal(fatal.status, "FAILED");
    assert.equal(fatal.closeReason, "S-1 Execute failed after 1 attempt: the order does not exist");
    assert.equal(attempts.get("fatal"), 1);

    const retry = await client.waitForFlow("fail-retry", { timeoutMs: 10_000 });
    assert.equal(retry.status, "COMPLETED");
    assert.deepEqual(retry.output, { mode: "retry", attempt: 3 });

    await eventually("the TypeError's retry to be scheduled", async () => {
      const state = await client.getFlowState("fail-type-error");
      return state.active.some((a) => a.stepExecutionId === "S-1" && a.taskState === "BACKOFF");
    });
    const state = await client.getFlowState("fail-type-error");
    assert.match(state.active.find((a) => a.stepExecutionId === "S-1")?.lastFailure?.error ?? "", /^TypeError: /);
    await client.stopFlow("fail-type-error");

    const always = await client.waitForFlow("fail-always", { timeoutMs: 10_000 });
    assert.equal(always.status, "FAILED");
    assert.equal(always.closeReason, "S-1 Execute failed after 3 attempts: it never works");
    await worker.shutdown();
    await running;
  });

  test("graceful shutdown lets a running attempt finish and waits for its result's ack", async () => {
    let started = false;
    let finished = false;
    const flow = oneStep("w-shutdown", {
      async execute() {
        started = true;
        await sleep(700);
        finished = true;
        return gracefulComplete({ finished: true });
      },
    });
    const { worker, running } = await newWorker([flow]);
    await client.startFlow(flow, "shutdown-1");
    await eventually("the attempt to start", () => started);
    const t0 = Date.now();
    await worker.shutdown();
    assert.ok(finished, "shutdown() resolved before the attempt finished");
    assert.ok(Date.now() - t0 >= 500, `shutdown took only ${Date.now() - t0} ms`);
    // The result was acknowledged (durable) before shutdown() resolved.
    const flowNow = await client.describeFlow("shutdown-1");
    assert.equal(flowNow.status, "COMPLETED");
    assert.deepEqual(flowNow.output, { finished: true });
    assert.equal(worker.stats().resultsAccepted, 1);
    await running;
    // Idempotent, and run() is once only.
    await worker.shutdown();
    await assert.rejects(worker.run(), /FAILED_PRECONDITION: Worker.run\(\) may be called once/);
  });

  test("tasks that arrive after shutdown() are not run but handed back as retryable failures", async () => {
    const ran: string[] = [];
    let by = "first";
    // The retry comes after the first Worker closed its stream: a task sent
    // while it waits for the hand-back's acks is ignored until its attempt times out.
    const flow = oneStep("w-handback", {
      options: { execute: { retry: { maximumAttempts: 3, initialIntervalMs: 1_500 } } },
      async execute(ctx) {
        ran.push(`${by} ${ctx.flowId} ${ctx.attempt}`);
        if (by === "first") await sleep(800);
        return gracefulComplete(by);
      },
    });
    const { worker: first, running: firstRunning } = await newWorker([flow], { maxConcurrentTasks: 2 });
    await client.startFlow(flow, "handback-1");
    await eventually("the first attempt to start", () => ran.length === 1);
    const stopped = first.shutdown();
    // The Worker still has room for a task: the server sends it, the Worker holds it.
    await client.startFlow(flow, "handback-2");
    await eventually("the second task to arrive", () => first.stats().tasksReceived === 2);
    await stopped;
    await firstRunning;
    assert.deepEqual(ran, ["first handback-1 1"]);
    assert.equal((await client.describeFlow("handback-1")).status, "COMPLETED");
    await eventually("the handed-back attempt's failure in the state", async () => {
      const failure = (await client.getFlowState("handback-2")).active[0]?.lastFailure;
      return /is shutting down; the task was not started/.test(failure?.error ?? "");
    });

    // Another Worker runs its retry.
    by = "second";
    const { worker: second, running: secondRunning } = await newWorker([flow]);
    const done = await client.waitForFlow("handback-2", { timeoutMs: 10_000 });
    assert.equal(done.status, "COMPLETED");
    assert.equal(done.output, "second");
    assert.deepEqual(ran, ["first handback-1 1", "second handback-2 2"]);
    await second.shutdown();
    await secondRunning;
  });

  test("past shutdownTimeoutMs the running attempts' signals abort and shutdown ends", async () => {
    let started = false;
    let reason: unknown;
    const flow = oneStep("w-stuck", {
      options: { execute: { attemptTimeoutMs: 30_000, retry: { maximumAttempts: 1 } } },
      async execute(ctx) {
        started = true;
        reason = await aborted(ctx.signal, 10_000);
        return deadEnd();
      },
    });
    const { worker, logger, running } = await newWorker([flow], { shutdownTimeoutMs: 300 });
    await client.startFlow(flow, "stuck-1");
    await eventually("the attempt to start", () => started);
    const t0 = Date.now();
    await worker.shutdown();
    await running;
    assert.ok(Date.now() - t0 < 3_000, `shutdown took ${Date.now() - t0} ms`);
    await eventually("the attempt to see the shutdown timeout", () => reason !== undefined);
    assert.ok(reason instanceof TaskCancelledError && reason.reason === "shutdown-timeout");
    assert.ok(logger.lines.some((l) => l.includes("shutdown timeout passed with 1 task(s) running")));
    await client.stopFlow("stuck-1");
  });

  test("run() refuses a Worker that hosts no Flow, and host() what is not a Flow, saying why", async () => {
    const bare = new Worker({ addresses: [server.address] });
    await assert.rejects(bare.run(), /INVALID_ARGUMENT: the worker hosts no Flow: call host\(flow\) before run\(\)/);
    const { worker: serving, running } = await newWorker([oneStep("w-early", { execute: () => deadEnd() })]);
    assert.throws(() => serving.host(oneStep("late", { execute: () => deadEnd() })), /FAILED_PRECONDITION: host\(\) must be called before run\(\)/);
    await serving.shutdown();
    await running;
    assert.throws(() => new Worker().host({ type: "x" } as unknown as Flow), /INVALID_ARGUMENT: host\(\) needs a Flow/);
    const many = new Worker({ addresses: [server.address] });
    for (let i = 0; i < 101; i++) many.host(oneStep(`many-${i}`, { execute: () => deadEnd() }));
    await assert.rejects(many.run(), /INVALID_ARGUMENT: the worker hosts 101 Flow types; a hello takes at most 100/);
    assert.throws(() => new Worker({ maxConcurrentTasks: 0 }), /maxConcurrentTasks must be an integer of at least 1/);
  });

  test("a Worker whose hello the server refuses stops, and run() rejects with the server's reason", async () => {
    // The server takes at most 1,000 concurrent tasks per Worker.
    const greedy = new Worker({ addresses: [server.address], maxConcurrentTasks: 5000, reconnectBackoffInitialMs: 20, reconnectBackoffMaxMs: 200 });
    workers.push(greedy);
    greedy.host(oneStep("greedy", { execute: () => deadEnd() }));
    const started = Date.now();
    await assert.rejects(greedy.run(), (error: Error) => {
      assert.match(error.message, /INVALID_ARGUMENT: .* refused this Worker: max_concurrent_tasks 5000 is over the limit of 1000/);
      return true;
    });
    assert.ok(Date.now() - started < 5000, "run() kept retrying");
  });
});
