// The TypeScript example Flows (examples/flows/) end to end against a real
// `dex-server-zd dev`, as tests/server/test_flow_examples.py runs the C++ ones:
// each example completes as it should with the server SIGKILLed in the middle
// of its run and started again on the same data directory and port, and every
// acknowledged start and publish is accounted for (one run per Flow ID; each
// acknowledged publish appears exactly once in the run's history).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, test } from "node:test";

// The examples import the package by its name; so does this test, so that
// their Flows and this Worker are the same classes.
import { Client, Worker } from "dex-sdk";

import { allFlows, drive, EXAMPLES, type DriveResult, type ExampleName } from "../examples/flows/index";
import * as grpc from "@grpc/grpc-js";

import { checkReadiness } from "../src/readiness";
import { DevServer, eventually, freePort, MemoryLogger, ServeProcess } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Until `address` says it is a hot standby (gRPC health "dex.HotStandby" SERVING). */
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

function checkExample(example: ExampleName, result: DriveResult): void {
  const { flow } = result;
  assert.equal(flow.status, "COMPLETED", `${example}: ${JSON.stringify(flow)}`);
  const out = flow.outputs[0]?.output as Record<string, unknown>;
  switch (example) {
    case "order":
      assert.equal(out["status"], "shipped");
      assert.deepEqual(out["approvedBy"], { seller: "s-1" });
      // Two declined attempts, retried (a crash may cost the Step one more attempt).
      assert.ok((out["chargedOnAttempt"] as number) >= 3, JSON.stringify(out));
      assert.ok((out["reminders"] as number) >= 1, "the reminder Timer looped Ship at least once");
      break;
    case "order-refund":
      assert.equal(out["status"], "refunded");
      assert.match(out["reason"] as string, /carrier refused/);
      break;
    case "signup":
      assert.equal(out["verified"], "ann@example.com");
      assert.equal(out["wrongCodes"], 1);
      assert.ok((out["sends"] as number) >= 2, "the resend loop sent a second e-mail");
      break;
    case "quotes":
      assert.deepEqual(out["winner"], { carrier: "B", price: 9 }); // C, the slowest, was canceled
      break;
  }
  // One run per Flow ID, and each acknowledged publish once in the history (a
  // publish repeated after the crash carries the same request ID and adds nothing).
  assert.equal(flow.runs, 1, `${example}: runs`);
  assert.deepEqual(result.historyPublishes, result.published, `${example}: the history's publishes`);
}

describe("the TypeScript example Flows", () => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const step of cleanup.reverse()) await step();
    cleanup.length = 0;
  });

  test("each example completes through SIGKILLs of dev in the middle of its run (after the starts, before the publishes)", async () => {
    const server = await DevServer.start();
    cleanup.push(() => server.stop());
    const logger = new MemoryLogger();
    const worker = new Worker({ addresses: [server.address], logger, shutdownTimeoutMs: 5_000 });
    for (const flow of allFlows) worker.host(flow);
    cleanup.push(() => worker.shutdown());
    void worker.run();
    await worker.ready(); // its hello declared the Flows durably
    const client = new Client({ addresses: [server.address], timeoutMs: 30_000 });
    cleanup.push(() => client.close());

    const started = new Set<string>();
    let allStarted: () => void = () => undefined;
    const allStartedPromise = new Promise<void>((resolve) => (allStarted = resolve));
    // A second SIGKILL when the first run is about to publish: its publishes
    // (and the others' waits) go through the restart.
    let secondCrash: Promise<void> | undefined;
    const runs = EXAMPLES.map((example) =>
      drive(client, example, `${example}-1`, (e) => {
        logger.info(`test: ${example}: ${JSON.stringify(e)}`);
        if (e.event === "started") {
          started.add(example);
          if (started.size === EXAMPLES.length) allStarted();
        }
        if (e.event === "step-completed" && secondCrash === undefined) {
          logger.info("test: a run is about to publish; SIGKILL of the server again");
          secondCrash = server.kill9().then(() => server.restart());
        }
      }).then(
        (result) => ({ example, result }),
        (error: unknown) => {
          throw new Error(`${example}: ${error instanceof Error ? error.message : String(error)}\n${logger.lines.join("\n")}`);
        },
      ),
    );
    await allStartedPromise;
    logger.info("test: every run started; SIGKILL of the server");
    await server.kill9();
    await server.restart();
    const back = Date.now();
    logger.info("test: the server is back");
    // The reconnect backoff is capped at 1 s: the Worker serves the restarted server at once.
    await eventually("the Worker connected again", () => worker.stats().connectedAddress !== "", 2_500);
    logger.info(`test: the Worker connected ${Date.now() - back} ms after the server was ready`);
    const results = await Promise.all(runs);
    assert.ok(secondCrash !== undefined, "the second crash happened");
    await secondCrash;
    for (const { example, result } of results) checkExample(example, result);
    assert.ok(worker.stats().streamsAccepted >= 3, "the Worker reconnected to each restarted server");
  });

  test("each example completes through a hot standby's takeover after a SIGKILL of the active process", async () => {
    const dir = ServeProcess.makeDir();
    const a = new ServeProcess(dir, "a", await freePort(), "3s");
    const b = new ServeProcess(dir, "b", await freePort(), "3s");
    cleanup.push(() => a.kill9(), () => b.kill9());
    a.start();
    await a.waitForLine("dex-server-zd serve ready", 60_000);
    b.start();
    await b.waitForLine("API on", 30_000);
    await waitHot(b.address, 60_000);
    const addresses = [a.address, b.address];
    const logger = new MemoryLogger();
    const worker = new Worker({ addresses, logger, shutdownTimeoutMs: 5_000 });
    for (const flow of allFlows) worker.host(flow);
    cleanup.push(() => worker.shutdown());
    void worker.run();
    await worker.ready();
    const client = new Client({ addresses, timeoutMs: 30_000 });
    cleanup.push(() => client.close());
    const started = new Set<string>();
    let allStarted: () => void = () => undefined;
    const allStartedPromise = new Promise<void>((resolve) => (allStarted = resolve));
    const runs = EXAMPLES.map((example) =>
      drive(client, example, `${example}-ha`, (e) => {
        logger.info(`test: ${example}: ${JSON.stringify(e)}`);
        if (e.event === "started" && started.add(example).size === EXAMPLES.length) allStarted();
      }).then(
        (result) => ({ example, result }),
        (error: unknown) => {
          throw new Error(`${example}: ${error instanceof Error ? error.message : String(error)}\n${logger.lines.join("\n")}`);
        },
      ),
    );
    await allStartedPromise;
    logger.info("test: every run started; SIGKILL of the active process");
    await a.kill9();
    await b.waitForLine("dex-server-zd serve ready", 30_000);
    for (const { example, result } of await Promise.all(runs)) checkExample(example, result);
    assert.equal(worker.stats().connectedAddress, b.address);
  });

  test("the example program: a worker process and a driver process", async () => {
    const server = await DevServer.start();
    cleanup.push(() => server.stop());
    const main = path.resolve(__dirname, "..", "examples", "flows", "main.js");
    const { spawn } = await import("node:child_process");
    const worker = spawn(process.execPath, [main, "worker", "--server", server.address], { stdio: ["ignore", "pipe", "pipe"] });
    cleanup.push(() => {
      worker.kill("SIGKILL");
    });
    // Its hello declared the Flows durably once it says it is connected.
    let workerOutput = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the worker did not connect within 30 s:\n${workerOutput}`)), 30_000);
      const onData = (chunk: Buffer): void => {
        workerOutput += chunk.toString("utf8");
        if (workerOutput.includes("connected to")) {
          clearTimeout(timer);
          resolve();
        }
      };
      worker.stdout?.on("data", onData);
      worker.stderr?.on("data", onData);
    });
    const output = await new Promise<string>((resolve, reject) => {
      execFile(
        process.execPath,
        [main, "drive", "quotes", "--flow-id", "quotes-cli", "--server", server.address],
        { timeout: 60_000 },
        (error, stdout, stderr) => (error === null ? resolve(stdout) : reject(new Error(`${error.message}\n${stdout}\n${stderr}`))),
      );
    });
    const lines = output
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const result = lines.find((l) => l["event"] === "result");
    assert.equal(result?.["status"], "COMPLETED", output);
  });
});
