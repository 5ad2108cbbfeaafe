// The Worker against a real dex-server-zd dev: flows of one and three Steps,
// the concurrency limit, heartbeats, cancellation through the AbortSignal,
// graceful shutdown, and StepFailure.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, StepFailure, TaskCancelledError, Worker, type Task, type WorkerOptions } from "../src/index";
import { DevServer, eventually, exampleFlowType, MemoryLogger } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

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

  function newWorker(options: WorkerOptions = {}): { worker: Worker; logger: MemoryLogger } {
    const logger = new MemoryLogger();
    const worker = new Worker({ addresses: [server.address], logger, shutdownTimeoutMs: 10_000, ...options });
    workers.push(worker);
    return { worker, logger };
  }

  test("runs the example flows of one and three Steps, retrying a failed attempt", async () => {
    const { worker } = newWorker();
    worker.handle<{ n: number }>("example", async (task) => {
      switch (task.step) {
        case "echo":
          return task.flowInput;
        case "fetch":
          return { items: task.flowInput.n + 2 };
        case "transform":
          if (task.attempt === 1) throw new Error("transform fails on its first attempt");
          return { total: (task.stepOutputs["fetch"] as { items: number }).items * 10 };
        case "store":
          return { stored: task.stepOutputs["transform"], input: task.input.flow };
        default:
          throw new StepFailure(`unknown step ${task.step}`, { nonRetryable: true });
      }
    });
    worker.registerFlowType(exampleFlowType("one-step")).registerFlowType(exampleFlowType("three-step"));
    const running = worker.run();
    await worker.ready(); // the flow types are registered

    const one = await client.startFlow({ flowType: "one-step", input: { n: 1 } });
    const three = await client.startFlow({ flowType: "three-step", input: { n: 1 } });
    const oneDone = await client.waitFlow(one.flowId, { timeoutMs: 15_000 });
    assert.equal(oneDone.status, "COMPLETED");
    assert.deepEqual(oneDone.output, { n: 1 });

    const threeDone = await client.waitFlow(three.flowId, { timeoutMs: 15_000 });
    assert.equal(threeDone.status, "COMPLETED", JSON.stringify(threeDone));
    assert.deepEqual(threeDone.output, { stored: { total: 30 }, input: { n: 1 } });
    const transform = threeDone.steps.find((s) => s.name === "transform");
    assert.deepEqual(
      transform?.attempts.map((a) => a.outcome),
      ["FAILED", "COMPLETED"],
    );
    assert.equal(transform?.attempts[0]?.error, "transform fails on its first attempt");

    await worker.shutdown();
    await running;
    const stats = worker.stats();
    assert.equal(stats.streamsAccepted, 1);
    assert.equal(stats.tasksReceived, 5);
    assert.equal(stats.resultsAccepted, 5);
    assert.equal(stats.running, 0);
  });

  test("never runs more than maxConcurrentTasks handlers at once", async () => {
    await client.registerFlowType({
      name: "w-concurrency",
      steps: [{ name: "work", taskQueue: "w-concurrency", startToCloseTimeout: "10s" }],
    });
    const { worker } = newWorker({ maxConcurrentTasks: 3 });
    let now = 0;
    let most = 0;
    worker.handle("w-concurrency", async () => {
      now++;
      most = Math.max(most, now);
      await sleep(100);
      now--;
      return { ok: true };
    });
    const running = worker.run();
    const ids = await Promise.all(
      Array.from({ length: 12 }, async () => (await client.startFlow({ flowType: "w-concurrency" })).flowId),
    );
    for (const id of ids) assert.equal((await client.waitFlow(id, { timeoutMs: 15_000 })).status, "COMPLETED");
    assert.equal(most, 3);
    await worker.shutdown();
    await running;
  });

  test("heartbeats keep a long attempt alive; an attempt without them times out", async () => {
    await client.registerFlowType({
      name: "w-heartbeat",
      steps: [
        {
          name: "long",
          taskQueue: "w-heartbeat",
          startToCloseTimeout: "20s",
          heartbeatTimeout: "400ms",
          retry: { maxAttempts: 2, initialInterval: "100ms" },
        },
      ],
    });
    const { worker } = newWorker();
    const seen: { attempt: number; aborted: unknown }[] = [];
    worker.handle<{ beat: boolean }>("w-heartbeat", async (task) => {
      const beat = task.flowInput.beat || task.attempt > 1;
      for (let i = 0; i < 12; i++) {
        if (beat) assert.equal(task.heartbeat({ progress: i }), true);
        await sleep(100);
      }
      seen.push({ attempt: task.attempt, aborted: task.signal.aborted });
      return { attempt: task.attempt };
    });
    const running = worker.run();
    const beating = await client.startFlow({ flowType: "w-heartbeat", input: { beat: true } });
    const silent = await client.startFlow({ flowType: "w-heartbeat", input: { beat: false } });

    const beatDone = await client.waitFlow(beating.flowId, { timeoutMs: 15_000 });
    assert.equal(beatDone.status, "COMPLETED");
    assert.deepEqual(
      beatDone.steps[0]?.attempts.map((a) => a.outcome),
      ["COMPLETED"],
    );

    // The silent attempt passes its 400 ms heartbeat timeout; the retry heartbeats.
    const silentDone = await client.waitFlow(silent.flowId, { timeoutMs: 15_000 });
    assert.equal(silentDone.status, "COMPLETED");
    assert.deepEqual(
      silentDone.steps[0]?.attempts.map((a) => a.outcome),
      ["TIMED_OUT", "COMPLETED"],
    );
    assert.deepEqual(silentDone.output, { attempt: 2 });
    // The timed-out attempt's late result is refused as stale and dropped.
    await eventually("the stale result's ack", () => worker.stats().resultsRefused === 1);
    assert.ok(worker.stats().heartbeatsSent >= 20, `${worker.stats().heartbeatsSent} heartbeats`);
    await worker.shutdown();
    await running;
  });

  test("cancelling the flow aborts the handler's AbortSignal (seen through a heartbeat)", async () => {
    await client.registerFlowType({
      name: "w-cancel",
      steps: [{ name: "wait", taskQueue: "w-cancel", startToCloseTimeout: "30s" }],
    });
    const { worker } = newWorker();
    let started = false;
    let reason: unknown;
    worker.handle("w-cancel", async (task: Task) => {
      started = true;
      // Heartbeat until the server says stop; bounded.
      for (let i = 0; i < 200 && !task.signal.aborted; i++) {
        task.heartbeat();
        await sleep(50);
      }
      reason = task.signal.reason;
      throw task.signal.reason;
    });
    const running = worker.run();
    const { flowId } = await client.startFlow({ flowType: "w-cancel" });
    await eventually("the handler to start", () => started);
    const t0 = Date.now();
    const cancelled = await client.cancelFlow(flowId);
    assert.equal(cancelled.status, "CANCELLED");
    await eventually("the handler to see the cancellation", () => reason !== undefined, 5_000);
    assert.ok(Date.now() - t0 < 2_000);
    assert.ok(reason instanceof TaskCancelledError);
    assert.equal(reason.reason, "cancel-requested");
    assert.match(reason.message, /flow was cancelled/);
    await worker.shutdown();
    await running;
    assert.equal((await client.getFlow(flowId)).status, "CANCELLED");
  });

  test("the start-to-close timeout aborts the signal", async () => {
    await client.registerFlowType({
      name: "w-deadline",
      steps: [{ name: "slow", taskQueue: "w-deadline", startToCloseTimeout: "300ms", retry: { maxAttempts: 1 } }],
    });
    const { worker } = newWorker();
    let reason: unknown;
    worker.handle("w-deadline", async (task) => {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5_000);
        task.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve();
        });
      });
      reason = task.signal.reason;
      // Past the server's own timeout too (it may sweep a little after the
      // deadline, and a result before that is still accepted).
      await sleep(1_000);
      return "late";
    });
    const running = worker.run();
    const { flowId } = await client.startFlow({ flowType: "w-deadline" });
    const done = await client.waitFlow(flowId, { timeoutMs: 10_000 });
    assert.equal(done.status, "FAILED");
    assert.equal(done.steps[0]?.attempts[0]?.outcome, "TIMED_OUT");
    await eventually("the handler to see its deadline", () => reason !== undefined, 5_000);
    assert.ok(reason instanceof TaskCancelledError && reason.reason === "start-to-close-timeout");
    await worker.shutdown();
    await running;
  });

  test("StepFailure: non-retryable fails the flow at once, retryable is retried, other errors are retryable", async () => {
    await client.registerFlowType({
      name: "w-failures",
      steps: [{ name: "s", taskQueue: "w-failures", retry: { maxAttempts: 3, initialInterval: "50ms" } }],
    });
    const { worker } = newWorker();
    worker.handle<{ mode: string }>("w-failures", (task) => {
      const { mode } = task.flowInput;
      if (mode === "fatal") throw new StepFailure("the order does not exist", { nonRetryable: true });
      if (mode === "retry" && task.attempt < 3) throw new StepFailure(`busy on attempt ${task.attempt}`);
      if (mode === "type-error" && task.attempt === 1) (undefined as unknown as () => void)();
      if (mode === "always") throw new Error("it never works");
      return { mode, attempt: task.attempt }; // a synchronous handler is fine too
    });
    const running = worker.run();
    const start = async (mode: string): Promise<string> =>
      (await client.startFlow({ flowType: "w-failures", input: { mode } })).flowId;
    const [fatal, retry, typeError, always] = await Promise.all(["fatal", "retry", "type-error", "always"].map(start));

    const fatalDone = await client.waitFlow(fatal as string, { timeoutMs: 10_000 });
    assert.equal(fatalDone.status, "FAILED");
    assert.equal(fatalDone.steps[0]?.attempts.length, 1);
    assert.match(fatalDone.error, /the order does not exist/);

    const retryDone = await client.waitFlow(retry as string, { timeoutMs: 10_000 });
    assert.equal(retryDone.status, "COMPLETED");
    assert.deepEqual(
      retryDone.steps[0]?.attempts.map((a) => `${a.outcome} ${a.error}`.trim()),
      ["FAILED busy on attempt 1", "FAILED busy on attempt 2", "COMPLETED"],
    );

    const typeErrorDone = await client.waitFlow(typeError as string, { timeoutMs: 10_000 });
    assert.equal(typeErrorDone.status, "COMPLETED");
    assert.match(typeErrorDone.steps[0]?.attempts[0]?.error ?? "", /^TypeError: /);

    const alwaysDone = await client.waitFlow(always as string, { timeoutMs: 10_000 });
    assert.equal(alwaysDone.status, "FAILED");
    assert.equal(alwaysDone.steps[0]?.attempts.length, 3);
    assert.match(alwaysDone.error, /it never works/);
    await worker.shutdown();
    await running;
  });

  test("graceful shutdown lets a running task finish and waits for its result's ack", async () => {
    await client.registerFlowType({
      name: "w-shutdown",
      steps: [{ name: "slow", taskQueue: "w-shutdown", startToCloseTimeout: "10s" }],
    });
    const { worker } = newWorker();
    let started = false;
    let finished = false;
    worker.handle("w-shutdown", async () => {
      started = true;
      await sleep(700);
      finished = true;
      return { finished: true };
    });
    const running = worker.run();
    const { flowId } = await client.startFlow({ flowType: "w-shutdown" });
    await eventually("the handler to start", () => started);
    const t0 = Date.now();
    await worker.shutdown();
    assert.ok(finished, "shutdown() resolved before the handler finished");
    assert.ok(Date.now() - t0 >= 500, `shutdown took only ${Date.now() - t0} ms`);
    // The result was acknowledged (durable) before shutdown() resolved.
    const flow = await client.getFlow(flowId);
    assert.equal(flow.status, "COMPLETED");
    assert.deepEqual(flow.output, { finished: true });
    assert.equal(worker.stats().resultsAccepted, 1);
    await running;
    // Idempotent, and run() is once only.
    await worker.shutdown();
    await assert.rejects(worker.run(), /FAILED_PRECONDITION: Worker.run\(\) may be called once/);
  });

  test("tasks that arrive after shutdown() are not run but handed back as retryable failures", async () => {
    await client.registerFlowType({
      name: "w-handback",
      steps: [{ name: "s", taskQueue: "w-handback", retry: { maxAttempts: 3, initialInterval: "100ms" } }],
    });
    const { worker: first } = newWorker({ maxConcurrentTasks: 2 });
    const ran: string[] = [];
    first.handle("w-handback", async (task) => {
      ran.push(task.flowId);
      await sleep(800);
      return "first";
    });
    const firstRunning = first.run();
    const one = await client.startFlow({ flowType: "w-handback" });
    await eventually("the first task to start", () => ran.length === 1);
    const stopped = first.shutdown();
    // The Worker still has room for a task: the server sends it, the Worker holds it.
    const two = await client.startFlow({ flowType: "w-handback" });
    await eventually("the second task to arrive", () => first.stats().tasksReceived === 2);
    await stopped;
    await firstRunning;
    assert.deepEqual(ran, [one.flowId]);
    assert.equal((await client.getFlow(one.flowId)).status, "COMPLETED");
    const handedBack = await client.getFlow(two.flowId);
    assert.equal(handedBack.steps[0]?.attempts[0]?.outcome, "FAILED");
    assert.match(handedBack.steps[0]?.attempts[0]?.error ?? "", /is shutting down; the task was not started/);

    // Another Worker runs its retry.
    const { worker: second } = newWorker();
    second.handle("w-handback", () => "second");
    const secondRunning = second.run();
    const done = await client.waitFlow(two.flowId, { timeoutMs: 10_000 });
    assert.equal(done.status, "COMPLETED");
    assert.equal(done.output, "second");
    await second.shutdown();
    await secondRunning;
  });

  test("past shutdownTimeoutMs the running handlers' signals abort and shutdown ends", async () => {
    await client.registerFlowType({
      name: "w-stuck",
      steps: [{ name: "stuck", taskQueue: "w-stuck", startToCloseTimeout: "30s", retry: { maxAttempts: 1 } }],
    });
    const { worker, logger } = newWorker({ shutdownTimeoutMs: 300 });
    let started = false;
    let reason: unknown;
    worker.handle("w-stuck", async (task) => {
      started = true;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 10_000);
        task.signal.addEventListener("abort", () => {
          clearTimeout(timer);
          resolve();
        });
      });
      reason = task.signal.reason;
      return null;
    });
    const running = worker.run();
    const { flowId } = await client.startFlow({ flowType: "w-stuck" });
    await eventually("the handler to start", () => started);
    const t0 = Date.now();
    await worker.shutdown();
    await running;
    assert.ok(Date.now() - t0 < 3_000, `shutdown took ${Date.now() - t0} ms`);
    await eventually("the handler to see the shutdown timeout", () => reason !== undefined);
    assert.ok(reason instanceof TaskCancelledError && reason.reason === "shutdown-timeout");
    assert.ok(logger.lines.some((l) => l.includes("shutdown timeout passed with 1 task(s) running")));
    await client.cancelFlow(flowId);
  });

  test("run() refuses a worker without handlers and a bad flow type, saying why", async () => {
    const bare = new Worker({ addresses: [server.address] });
    await assert.rejects(bare.run(), /INVALID_ARGUMENT: the worker has no handler/);
    const { worker } = newWorker();
    worker.handle("x", () => null).registerFlowType("name: nope\nsteps: []\n");
    await assert.rejects(worker.run(), /INVALID_ARGUMENT: registering flow type definition #1: .*nope/);
    assert.throws(() => new Worker({ maxConcurrentTasks: 0 }), /maxConcurrentTasks must be an integer of at least 1/);
  });
});
