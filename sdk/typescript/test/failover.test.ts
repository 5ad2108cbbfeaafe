// The Worker and Client across a server crash, and with an address where
// nothing listens or a standby answers: every acknowledged start completes,
// the Worker reconnects and re-sends the results the crashed process never
// acknowledged, and the calls find the active process.
import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { Client, DexError, Flow, Worker, goTo, gracefulComplete, type Step } from "../src/index";
import { services } from "../src/proto";
import { DevServer, eventually, freePort, MemoryLogger } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface ChainInput {
  i: number;
  /** The attempt that completed each Step so far, by Step type. */
  attempts: Record<string, number>;
}

// Three Steps in a row, 150 ms each; recovery ends the attempts a Worker had
// received with NOT_COMPLETED, which consumes a retry, so the Steps get a few.
function chainStep(type: string, next: string | undefined): Step<ChainInput> {
  return {
    type,
    options: { execute: { attemptTimeoutMs: 10_000, retry: { maximumAttempts: 5, initialIntervalMs: 100 } } },
    async execute(ctx) {
      await sleep(150);
      const out = { i: ctx.input.i, attempts: { ...ctx.input.attempts, [type]: ctx.attempt } };
      return next === undefined ? gracefulComplete({ ...out, last: type }) : goTo(next, out);
    },
  };
}
const CHAIN = new Flow({
  type: "failover-chain",
  startStep: "A",
  steps: [chainStep("A", "B"), chainStep("B", "C"), chainStep("C", undefined)],
});

/** A Flow of one Step that completes with `output`, or with its input when none is given. */
function echoFlow(type: string, output?: unknown): Flow {
  const only: Step = { type: "Echo", execute: (ctx) => gracefulComplete(output ?? { echoed: ctx.input }) };
  return new Flow({ type, startStep: only, steps: [only] });
}

/**
 * A process that answers every call and refuses every Worker stream with
 * UNAVAILABLE, as a standby does ("this process is a standby").
 */
async function fakeStandby(): Promise<{ address: string; calls: () => number; stop: () => Promise<void> }> {
  const server = new grpc.Server();
  let calls = 0;
  const refuse = { code: grpc.status.UNAVAILABLE, details: "this process is a standby" };
  const unary = (_call: unknown, callback: grpc.sendUnaryData<unknown>): void => {
    calls++;
    callback(refuse);
  };
  const { FlowService, WorkerTaskService } = services();
  const flowImpl: grpc.UntypedServiceImplementation = {};
  for (const method of Object.keys(FlowService.service)) flowImpl[method] = unary;
  server.addService(FlowService.service, flowImpl);
  server.addService(WorkerTaskService.service, {
    PollWorkerTask: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
      calls++;
      call.emit("error", refuse);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error === null ? resolve(bound) : reject(error),
    ),
  );
  return {
    address: `127.0.0.1:${port}`,
    calls: () => calls,
    stop: () => new Promise<void>((resolve) => server.tryShutdown(() => resolve())),
  };
}

describe("failover", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup.length = 0;
  });

  test("kill -9 of the server mid-run: it restarts on the same directory and port, every run completes", async () => {
    const server = await DevServer.start();
    cleanup.push(() => server.stop());
    const client = new Client({ addresses: [server.address], timeoutMs: 20_000 });
    cleanup.push(() => client.close());
    const logger = new MemoryLogger();
    const worker = new Worker({
      addresses: [server.address],
      maxConcurrentTasks: 8,
      logger,
      reconnectBackoffInitialMs: 50,
      reconnectBackoffMaxMs: 500,
      shutdownTimeoutMs: 5_000,
    });
    cleanup.push(() => worker.shutdown());
    worker.host(CHAIN);
    const running = worker.run();
    await worker.ready();

    const count = 24;
    const ids = Array.from({ length: count }, (_, i) => `failover-${i}`);
    for (const [i, id] of ids.entries()) await client.startFlow(CHAIN, id, { i, attempts: {} });
    // Waits that are in flight across the crash.
    const waits = ids.map((id) => client.waitForFlow(id, { timeoutMs: 60_000 }));

    logger.info(`test: ${count} runs started`);
    await eventually("some results acknowledged", () => worker.stats().resultsAccepted >= 8);
    const before = worker.stats();
    logger.info(`test: killing the server; ${JSON.stringify(before)}`);
    assert.ok(before.running > 0, "no attempt running at the kill");
    await server.kill9();

    // The running attempts finish while no process is there: their results
    // wait for the next stream.
    await eventually(
      "the attempts to finish and the stream to end while the server is down",
      () => worker.stats().running === 0 && worker.stats().connectedAddress === "",
      5_000,
    );
    const stranded = worker.stats();
    logger.info(`test: attempts finished; ${JSON.stringify(stranded)}`);
    assert.ok(stranded.tasksFinished > before.tasksFinished);

    // Down for longer than a new call's 1.5 s grace: the waits that a
    // process answered before go on waiting through the outage.
    await sleep(2_000);
    await server.restart();
    const runs = await Promise.all(waits);
    for (const [i, run] of runs.entries()) {
      assert.equal(run.status, "COMPLETED", JSON.stringify(run));
      assert.equal((run.output as { i: number; last: string }).i, i);
      assert.equal((run.output as { last: string }).last, "C");
    }
    // Some attempt was ended by the recovery (NOT_COMPLETED) and retried.
    const attempts = runs.flatMap((r) => Object.values((r.output as ChainInput).attempts));
    assert.ok(attempts.some((n) => n > 1), attempts.join(","));

    const after = worker.stats();
    assert.ok(after.streamsAccepted >= 2, `streams accepted: ${after.streamsAccepted}`);
    assert.equal(after.connectedAddress, server.address);
    assert.ok(after.resultsResent >= 1, `results re-sent: ${after.resultsResent}`);
    // Those attempts had been ended by the recovery: the new process refuses them as stale.
    assert.ok(after.resultsRefused >= 1, `results refused: ${after.resultsRefused}`);
    assert.ok(logger.lines.some((l) => /re-sending \d+ unacknowledged result\(s\)/.test(l)), logger.lines.join("\n"));

    await worker.shutdown();
    await running;
  });

  test("two addresses, one with nothing listening: the Client and the Worker find the active process", async () => {
    const server = await DevServer.start();
    cleanup.push(() => server.stop());
    const nowhere = `127.0.0.1:${await freePort()}`;
    const addresses = [nowhere, server.address];
    const client = new Client({ addresses, timeoutMs: 10_000 });
    cleanup.push(() => client.close());
    const worker = new Worker({ addresses, logger: new MemoryLogger(), reconnectBackoffInitialMs: 50 });
    cleanup.push(() => worker.shutdown());
    const flow = echoFlow("two-addresses");
    worker.host(flow);
    const running = worker.run();
    await worker.ready();

    const stats = worker.stats();
    assert.equal(stats.connectedAddress, server.address);
    // The readiness probe found the active process first: nothing refused.
    assert.equal(stats.streamsRefused, 0);

    await client.startFlow(flow, "two-1", { x: 1 });
    assert.equal(client.preferredAddress, server.address);
    const done = await client.waitForFlow("two-1", { timeoutMs: 10_000 });
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.output, { echoed: { x: 1 } });
    await worker.shutdown();
    await running;

    // Nobody at either address: a Client that reached the node before keeps
    // looking until the call's deadline (a restart or a failover), then names both.
    await server.stop();
    const t0 = Date.now();
    await assert.rejects(client.describeFlow("two-1", { timeoutMs: 2_000 }), (error: unknown) => {
      assert.ok(error instanceof DexError);
      assert.equal(error.code, "UNAVAILABLE");
      assert.match(error.message, /^UNAVAILABLE: no active dex process at any of 2 addresses \(kept trying for 2s\); /);
      assert.ok(error.message.includes(nowhere) && error.message.includes(server.address), error.message);
      return true;
    });
    const took = Date.now() - t0;
    assert.ok(took >= 1_900 && took < 5_000, `took ${took} ms`);
  });

  test("a standby listed first: the Worker and the Client move on to the active process", async () => {
    const standby = await fakeStandby();
    cleanup.push(() => standby.stop());
    const server = await DevServer.start();
    cleanup.push(() => server.stop());
    const addresses = [standby.address, server.address];
    const worker = new Worker({ addresses, logger: new MemoryLogger(), reconnectBackoffInitialMs: 50 });
    cleanup.push(() => worker.shutdown());
    const flow = echoFlow("behind-a-standby", "active");
    worker.host(flow);
    const running = worker.run();
    await worker.ready();
    assert.equal(worker.stats().connectedAddress, server.address);
    // The readiness probe (the active process SERVING, the standby not)
    // sends the stream straight to the active process.
    assert.equal(worker.stats().streamsRefused, 0);

    const client = new Client({ addresses, timeoutMs: 10_000 });
    cleanup.push(() => client.close());
    await client.startFlow(flow, "standby-1");
    assert.equal(client.preferredAddress, server.address);
    assert.equal((await client.waitForFlow("standby-1", { timeoutMs: 10_000 })).output, "active");
    // The clients probe first too: the standby saw no call at all.
    assert.equal(standby.calls(), 0, `the standby saw ${standby.calls()} calls`);
    await worker.shutdown();
    await running;

    // With only the standby, a call keeps trying until its deadline (a
    // process answered: it may become active), then names what it said.
    const onlyStandby = new Client({ addresses: [standby.address], timeoutMs: 1_000 });
    cleanup.push(() => onlyStandby.close());
    const t0 = Date.now();
    await assert.rejects(onlyStandby.describeFlow("standby-1"), (error: unknown) => {
      assert.ok(error instanceof DexError);
      // UNAVAILABLE, or DEADLINE_EXCEEDED when the last attempt ran into the deadline.
      assert.match(
        error.message,
        /^(UNAVAILABLE: the server at \S+ is not serving: this process is a standby \(kept trying for 1s\)|DEADLINE_EXCEEDED: .*; before that: the server at \S+ is not serving: this process is a standby)$/,
      );
      return true;
    });
    const took = Date.now() - t0;
    assert.ok(took >= 900 && took < 3_000, `took ${took} ms`);
  });

  test("shutdown() ends a Worker that is still looking for a server", async () => {
    const worker = new Worker({ addresses: [`127.0.0.1:${await freePort()}`], logger: new MemoryLogger() });
    cleanup.push(() => worker.shutdown());
    worker.host(echoFlow("nobody"));
    const running = worker.run();
    const ready = worker.ready();
    await sleep(300);
    const t0 = Date.now();
    await worker.shutdown();
    await running;
    assert.ok(Date.now() - t0 < 1_000, `took ${Date.now() - t0} ms`);
    await assert.rejects(ready, /CANCELLED: worker .* stopped before it was ready/);
    assert.equal(worker.stats().streamsAccepted, 0);
  });

  test("a Worker started before the server waits for it, then serves", async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const worker = new Worker({
      addresses: [address],
      logger: new MemoryLogger(),
      reconnectBackoffInitialMs: 50,
      reconnectBackoffMaxMs: 200,
    });
    cleanup.push(() => worker.shutdown());
    const flow = echoFlow("late-server", "served");
    worker.host(flow);
    const running = worker.run();
    await sleep(500);
    assert.equal(worker.stats().streamsAccepted, 0);

    const server = await DevServer.start({ port });
    cleanup.push(() => server.stop());
    await worker.ready();
    const client = new Client({ addresses: [address] });
    cleanup.push(() => client.close());
    await client.startFlow(flow, "late-1");
    assert.equal((await client.waitForFlow("late-1", { timeoutMs: 10_000 })).output, "served");
    await worker.shutdown();
    await running;
  });
});
