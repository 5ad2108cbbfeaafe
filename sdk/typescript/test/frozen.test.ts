// A frozen active process (SIGSTOP: a stalled host, a partition): its hot
// standby takes over once the lease expires, and the TypeScript Workers and
// Client, given both addresses, follow within seconds. The Workers notice the
// silent stream (the server pings every second; 3 s of silence is a dead
// stream) and find the new active process by gRPC health without waiting on
// the frozen one; waitForFlow re-checks the process it waits on.
import assert from "node:assert/strict";
import * as net from "node:net";
import { after, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { Client, DexError, Flow, Timer, Wait, Worker, deadEnd, goTo, gracefulComplete, type Step } from "../src/index";
import { services } from "../src/proto";
import { checkReadiness, probeReadiness, searchOrder } from "../src/readiness";
import { eventually, freePort, MemoryLogger, ServeProcess } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const LEASE_S = 3;

function chainStep(type: string, next: string | undefined): Step {
  return {
    type,
    options: { execute: { attemptTimeoutMs: 4_000, retry: { maximumAttempts: 5, initialIntervalMs: 100, maximumIntervalMs: 500 } } },
    execute: () => (next === undefined ? gracefulComplete({ step: type }) : goTo(next)),
  };
}
const CHAIN = new Flow({ type: "frozen-chain", startStep: "A", steps: [chainStep("A", "B"), chainStep("B", "C"), chainStep("C", undefined)] });
// A run of it waits ten minutes for nothing: it runs until stopped.
const sleeper: Step = { type: "Sleep", waitFor: () => Wait.anyOf(Timer.after(600_000)), execute: () => deadEnd() };
const IDLE = new Flow({ type: "frozen-idle", startStep: sleeper, steps: [sleeper] });

/** A Flow of one Step, for Workers that never get a task. */
const QUIET = new Flow({ type: "quiet", startStep: "S", steps: [{ type: "S", execute: () => deadEnd() }] });

async function waitHot(address: string, timeoutMs: number): Promise<void> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  try {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if ((await checkReadiness(client, "dex.HotStandby", Date.now() + 1000)) === "serving") return;
      await sleep(200);
    }
    throw new Error(`${address} never became a hot standby`);
  } finally {
    client.close();
  }
}

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** A listener that accepts connections and never says a word, as a frozen process's kernel does. */
async function frozenListener(): Promise<string> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

/** A WorkerTaskService that answers the hello and then says nothing: frozen after its HelloAck. */
async function silentAfterHello(): Promise<{ address: string; streams: () => number }> {
  const server = new grpc.Server();
  let streams = 0;
  server.addService(services().WorkerTaskService.service, {
    PollWorkerTask: (call: grpc.ServerDuplexStream<unknown, unknown>) => {
      call.once("data", () => {
        streams++;
        call.write({ helloAck: { nodeId: "silent", nodeEpoch: "1" } });
      });
      call.on("error", () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error === null ? resolve(bound) : reject(error),
    ),
  );
  cleanups.push(async () => server.forceShutdown());
  return { address: `127.0.0.1:${port}`, streams: () => streams };
}

/**
 * A standby (every FlowService call: UNAVAILABLE "this process is a standby")
 * with a gRPC health service that answers NOT_SERVING, or, with
 * `stallAfterFirst`, answers its first check and holds every later one until
 * the caller gives up: a standby that stalls in the middle of a client's search.
 */
async function standbyWithHealth(stallAfterFirst: boolean): Promise<string> {
  const server = new grpc.Server();
  const refuse = { code: grpc.status.UNAVAILABLE, details: "this process is a standby" };
  const { FlowService } = services();
  const flowImpl: grpc.UntypedServiceImplementation = {};
  for (const method of Object.keys(FlowService.service)) {
    flowImpl[method] = (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(refuse);
  }
  server.addService(FlowService.service, flowImpl);
  const identity = (b: Buffer): Buffer => b;
  const health: grpc.ServiceDefinition = {
    Check: {
      path: "/grpc.health.v1.Health/Check",
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  };
  let checks = 0;
  server.addService(health, {
    Check: (_call: unknown, callback: grpc.sendUnaryData<Buffer>) => {
      // HealthCheckResponse { status: NOT_SERVING (2) }; a held check is never answered.
      if (checks++ === 0 || !stallAfterFirst) callback(null, Buffer.from([0x08, 0x02]));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error === null ? resolve(bound) : reject(error),
    ),
  );
  cleanups.push(async () => server.forceShutdown());
  return `127.0.0.1:${port}`;
}

async function describeError(addresses: string[], timeoutMs: number): Promise<string> {
  const client = new Client({ addresses, timeoutMs });
  try {
    await client.describeFlow("f-1");
  } catch (error) {
    assert.ok(error instanceof DexError);
    return error.message;
  } finally {
    client.close();
  }
  assert.fail("describeFlow on two standbys succeeded");
}

test("an address silent only because the deadline cut the probe short keeps its earlier answer", async () => {
  const steady = await standbyWithHealth(false);
  const stalling = await standbyWithHealth(true);
  // Round one asks both (each: a standby); round two's probe finds `stalling`
  // silent until the call's 800 ms are spent.
  const message = await describeError([steady, stalling], 800);
  assert.match(message, /^UNAVAILABLE: no active dex process at any of 2 addresses/);
  for (const address of [steady, stalling]) {
    assert.ok(message.includes(`the server at ${address} is not serving: this process is a standby`), message);
  }
  assert.ok(!message.includes("did not answer a health check"), message);
});

test("an address silent for the probe's full second is reported as frozen", async () => {
  const steady = await standbyWithHealth(false);
  const stalling = await standbyWithHealth(true);
  const message = await describeError([steady, stalling], 3_000);
  assert.ok(
    message.includes(`the server at ${stalling} did not answer a health check within 1s (a frozen or cut-off process); not tried`),
    message,
  );
  assert.ok(message.includes(`the server at ${steady} is not serving`), message);
});

test("searchOrder: SERVING first, then answered, then unreachable; silent ones only when none answered", () => {
  assert.deepEqual(searchOrder(["notServing", "noAnswer", "serving"], 0), [2, 0]);
  assert.deepEqual(searchOrder(["unreachable", "notServing", "answered"], 2), [2, 1, 0]);
  assert.deepEqual(searchOrder(["noAnswer", "unreachable", "noAnswer"], 1), [1, 2, 0]);
});

test("probeReadiness asks every address at once and never waits past its timeout", async () => {
  const frozen = [await frozenListener(), await frozenListener()];
  const start = Date.now();
  const readiness = await probeReadiness(frozen, "", 800);
  const took = Date.now() - start;
  assert.deepEqual(readiness, ["noAnswer", "noAnswer"]);
  assert.ok(took >= 700 && took < 1500, `took ${took} ms`);
});

test("a Worker gives up a stream that is silent for 3 s and opens another", { timeout: 30_000 }, async () => {
  const silent = await silentAfterHello();
  const worker = new Worker({ addresses: [silent.address], logger: new MemoryLogger(), shutdownTimeoutMs: 1_000 });
  worker.host(QUIET);
  const running = worker.run();
  cleanups.push(async () => {
    await worker.shutdown();
    await running;
  });
  await worker.ready();
  const first = Date.now();
  await eventually("a second stream", () => silent.streams() >= 2, 6_000);
  const gap = Date.now() - first;
  assert.ok(gap >= 2_800 && gap < 4_500, `the second stream came ${gap} ms after the first`);
});

test("a Worker skips an address that accepts connections but never answers", { timeout: 30_000 }, async () => {
  const frozen = await frozenListener();
  const silent = await silentAfterHello();
  const worker = new Worker({
    addresses: [frozen, silent.address],
    logger: new MemoryLogger(),
    shutdownTimeoutMs: 1_000,
  });
  worker.host(QUIET);
  const start = Date.now();
  const running = worker.run();
  cleanups.push(async () => {
    await worker.shutdown();
    await running;
  });
  await worker.ready();
  assert.ok(Date.now() - start < 2_500, `connected after ${Date.now() - start} ms`);
  assert.equal(worker.stats().connectedAddress, silent.address);
});

test("Workers and waitForFlow follow a takeover from a frozen active process", { timeout: 110_000 }, async () => {
  const dir = ServeProcess.makeDir();
  const a = new ServeProcess(dir, "a", await freePort(), `${LEASE_S}s`);
  const b = new ServeProcess(dir, "b", await freePort(), `${LEASE_S}s`);
  cleanups.push(() => a.kill9(), () => b.kill9());
  a.start();
  await a.waitForLine("dex-server-zd serve ready", 60_000);
  b.start();
  await b.waitForLine("API on", 30_000);
  await waitHot(b.address, 60_000);
  const addresses = [a.address, b.address];

  const loggers = [new MemoryLogger(), new MemoryLogger()];
  const workers = loggers.map(
    (logger, k) => new Worker({ addresses, workerId: `ts-w${k}`, maxConcurrentTasks: 8, logger }),
  );
  const runs: Promise<void>[] = [];
  for (const worker of workers) {
    worker.host(CHAIN).host(IDLE);
    runs.push(worker.run());
    cleanups.push(async () => {
      await worker.shutdown();
      await runs[workers.indexOf(worker)];
    });
  }
  await Promise.all(workers.map((w) => w.ready()));
  assert.deepEqual(
    workers.map((w) => w.stats().connectedAddress),
    [a.address, a.address],
  );

  // A long poll on the active process that ends only when the run is stopped.
  const client = new Client({ addresses, timeoutMs: 10_000 });
  cleanups.push(async () => client.close());
  await client.startFlow(IDLE, "idle-1");
  const waitClient = new Client({ addresses, timeoutMs: 10_000 });
  cleanups.push(async () => waitClient.close());
  let waitEndedAt = 0;
  const waited = waitClient.waitForFlow("idle-1", { timeoutMs: 90_000 }).then((flow) => {
    waitEndedAt = Date.now();
    return flow;
  });

  // Runs started one after another, each with a short deadline.
  let stopStarting = false;
  const started: string[] = [];
  const starter = (async () => {
    for (let i = 0; i < 5000 && !stopStarting; i++) {
      try {
        await client.startFlow(CHAIN, `s-${i}`, undefined, { timeoutMs: 3_000 });
        started.push(`s-${i}`);
      } catch {
        // Refused or timed out while the node changes hands: the next one.
      }
      await sleep(50);
    }
  })();
  await sleep(3_000);
  assert.ok(started.length > 0, "no run started before the freeze");

  a.signal("SIGSTOP");
  const stoppedAt = Date.now();
  cleanups.push(async () => a.signal("SIGCONT"));
  await b.waitForLine("dex-server-zd serve ready", (LEASE_S + 1 + 20) * 1000);
  const tookOverS = (Date.now() - stoppedAt) / 1000;

  // A stop whose answer was lost is answered FAILED_PRECONDITION when repeated: stopped all the same.
  let stoppedIdleAt = 0;
  for (let i = 0; i < 100 && stoppedIdleAt === 0; i++) {
    try {
      await client.stopFlow("idle-1", { timeoutMs: 3_000 });
      stoppedIdleAt = Date.now();
    } catch (error) {
      if (error instanceof DexError && error.code === "FAILED_PRECONDITION") stoppedIdleAt = Date.now();
      else await sleep(200);
    }
  }
  assert.ok(stoppedIdleAt > 0, "the idle run could not be stopped on the new active process");
  let giveUp: NodeJS.Timeout | undefined;
  const flow = await Promise.race([
    waited,
    new Promise<never>((_, reject) => {
      giveUp = setTimeout(() => reject(new Error("waitForFlow did not return within 20 s of the stop")), 20_000);
    }),
  ]).finally(() => clearTimeout(giveUp));
  assert.equal(flow.status, "CANCELED");
  const waitReturnedS = Math.max(0, waitEndedAt - stoppedIdleAt) / 1000;

  await sleep(Math.max(0, (LEASE_S + 5) * 1000 - (Date.now() - stoppedAt)));
  stopStarting = true;
  await starter;

  const ends: number[] = [];
  for (const id of started) {
    const run = await client.describeFlow(id);
    if (run.status === "COMPLETED" && run.closedAt >= stoppedAt) ends.push(run.closedAt);
  }
  ends.sort((x, y) => x - y);
  assert.ok(ends.length > 0, "no run completed after the freeze");
  const gapS = ((ends[0] as number) - stoppedAt) / 1000;
  console.log(
    `[frozen active, TypeScript workers] takeover ${tookOverS.toFixed(2)}s after SIGSTOP; first completion ` +
      `${gapS.toFixed(2)}s after it (${ends.length} completions after the freeze, ${started.length} starts); ` +
      `waitForFlow returned ${waitReturnedS.toFixed(2)}s after the stop`,
  );
  assert.ok(gapS <= LEASE_S + 3, `the first completion came ${gapS} s after the SIGSTOP`);
  assert.ok(waitReturnedS < 5, `waitForFlow returned ${waitReturnedS} s after the stop`);
  assert.deepEqual(
    workers.map((w) => w.stats().connectedAddress),
    [b.address, b.address],
    loggers.map((l) => l.lines.join("\n")).join("\n----\n"),
  );
});
