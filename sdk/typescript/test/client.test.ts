// The Client against a real dex-server-zd dev: register, start, get, list,
// cancel, wait, and errors that say what went wrong.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, DexError, WaitTimeoutError, Worker } from "../src/index";
import { DevServer, exampleFlowType, freePort, MemoryLogger } from "./helpers";

describe("Client", () => {
  let server: DevServer;
  let client: Client;

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
  });

  after(async () => {
    client?.close();
    await server?.stop();
  });

  test("registers a flow type from YAML text and says when it is unchanged", async () => {
    const first = await client.registerFlowType(exampleFlowType("one-step"));
    assert.equal(first.flowType.name, "one-step");
    assert.equal(first.flowType.steps[0]?.name, "echo");
    assert.equal(first.flowType.steps[0]?.taskQueue, "example");
    assert.equal(first.flowType.steps[0]?.startToCloseTimeoutMs, 10_000);
    const again = await client.registerFlowType(exampleFlowType("one-step"));
    assert.equal(again.changed, false);
    const got = await client.getFlowType("one-step");
    assert.deepEqual(got, first.flowType);
    const all = await client.listFlowTypes();
    assert.ok(all.some((t) => t.name === "one-step"));
  });

  test("registers a flow type given as an object", async () => {
    const registered = await client.registerFlowType({
      name: "object-defined",
      steps: [{ name: "a", taskQueue: "nobody-serves-this", retry: { maxAttempts: 2, initialInterval: "250ms" } }],
    });
    assert.equal(registered.flowType.steps[0]?.retry?.maxAttempts, 2);
    assert.equal(registered.flowType.steps[0]?.retry?.initialIntervalMs, 250);
  });

  test("starts, gets, lists, cancels and waits for flows", async () => {
    await client.registerFlowType(exampleFlowType("three-step"));
    const started = await client.startFlow({ flowType: "three-step", input: { n: 7 }, flowId: "client-f1" });
    assert.equal(started.flowId, "client-f1");
    assert.equal(started.alreadyExisted, false);
    assert.equal(started.flow.status, "RUNNING");
    assert.deepEqual(started.flow.input, { n: 7 });

    // Idempotent on the flow ID.
    const again = await client.startFlow({ flowType: "three-step", input: { n: 7 }, flowId: "client-f1" });
    assert.equal(again.alreadyExisted, true);

    // Without a flow ID the client picks one.
    const picked = await client.startFlow({ flowType: "three-step" });
    assert.match(picked.flowId, /^[0-9a-f]{32}$/);
    assert.equal(picked.alreadyExisted, false);
    assert.deepEqual(picked.flow.input, {});

    const got = await client.getFlow("client-f1");
    assert.equal(got.flowType, "three-step");
    assert.deepEqual(
      got.steps.map((s) => s.name),
      ["fetch", "transform", "store"],
    );
    assert.ok(got.createdAtMs > 0);

    const running = await client.listFlows({ status: "RUNNING", pageSize: 1 });
    assert.equal(running.flows.length, 1);
    assert.notEqual(running.nextPageToken, "");
    const ids: string[] = [];
    for await (const flow of client.iterateFlows({ status: "RUNNING", pageSize: 1 })) ids.push(flow.flowId);
    assert.ok(ids.includes("client-f1") && ids.includes(picked.flowId), ids.join(","));

    const cancelled = await client.cancelFlow("client-f1");
    assert.equal(cancelled.status, "CANCELLED");
    // Cancelling an ended flow leaves it unchanged.
    assert.equal((await client.cancelFlow("client-f1")).status, "CANCELLED");
    const waited = await client.waitFlow("client-f1", { timeoutMs: 5_000 });
    assert.equal(waited.status, "CANCELLED");
    assert.ok(waited.endedAtMs >= waited.createdAtMs);

    const cancelledPage = await client.listFlows({ status: "CANCELLED" });
    assert.ok(cancelledPage.flows.some((f) => f.flowId === "client-f1"));
    await client.cancelFlow(picked.flowId);
  });

  test("waitFlow resolves with the ended flow and its output", async () => {
    await client.registerFlowType({
      name: "client-wait",
      steps: [{ name: "only", taskQueue: "client-wait", startToCloseTimeout: "10s" }],
    });
    const worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() });
    worker.handle<{ n: number }>("client-wait", async (task) => ({ doubled: task.flowInput.n * 2 }));
    const running = worker.run();
    try {
      const { flowId } = await client.startFlow({ flowType: "client-wait", input: { n: 21 } });
      const done = await client.waitFlow(flowId, { timeoutMs: 10_000 });
      assert.equal(done.status, "COMPLETED");
      assert.deepEqual(done.output, { doubled: 42 });
      assert.deepEqual(done.stepOutputs, { only: { doubled: 42 } });
      assert.equal(done.steps[0]?.attempts[0]?.outcome, "COMPLETED");
      assert.equal(done.steps[0]?.attempts[0]?.workerId, worker.workerId);
    } finally {
      await worker.shutdown();
      await running;
    }
  });

  test("waitFlow rejects with a WaitTimeoutError holding the flow when the timeout passes", async () => {
    await client.registerFlowType({ name: "client-never", steps: [{ name: "s", taskQueue: "nobody-serves-this" }] });
    const { flowId } = await client.startFlow({ flowType: "client-never" });
    const t0 = Date.now();
    await assert.rejects(client.waitFlow(flowId, { timeoutMs: 300 }), (error: unknown) => {
      assert.ok(error instanceof WaitTimeoutError);
      assert.equal(error.code, "DEADLINE_EXCEEDED");
      assert.equal(error.flow.status, "RUNNING");
      assert.match(error.message, /^DEADLINE_EXCEEDED: flow \w+ did not end within 300ms \(it is RUNNING; steps: s READY\)$/);
      return true;
    });
    assert.ok(Date.now() - t0 < 5_000);
    await client.cancelFlow(flowId);
  });

  test("waitFlow stops at once when its AbortSignal aborts", async () => {
    await client.registerFlowType({ name: "client-never", steps: [{ name: "s", taskQueue: "nobody-serves-this" }] });
    const { flowId } = await client.startFlow({ flowType: "client-never" });
    const controller = new AbortController();
    const t0 = Date.now();
    setTimeout(() => controller.abort(new Error("caller gave up")), 200);
    await assert.rejects(client.waitFlow(flowId, { signal: controller.signal }), /caller gave up/);
    assert.ok(Date.now() - t0 < 3_000, `took ${Date.now() - t0} ms`);
    // An aborted signal fails any call before it is sent.
    await assert.rejects(client.getFlow(flowId, { signal: controller.signal }), /caller gave up/);
    await client.cancelFlow(flowId);
  });

  test("describe names the active process", async () => {
    const node = await client.describe();
    assert.equal(node.nodeId, "dev");
    assert.match(node.nodeEpoch, /^[1-9][0-9]*$/);
    assert.notEqual(node.holderProcessId, "");
  });

  test("errors name the code and say what went wrong", async () => {
    await assert.rejects(client.getFlow("no-such-flow"), (error: unknown) => {
      assert.ok(error instanceof DexError);
      assert.equal(error.code, "NOT_FOUND");
      assert.equal(error.grpcCode, 5);
      assert.match(error.message, /^NOT_FOUND: .*no-such-flow/);
      return true;
    });
    await assert.rejects(client.startFlow({ flowType: "no-such-type" }), (error: unknown) => {
      assert.ok(error instanceof DexError);
      assert.match(error.message, /^(INVALID_ARGUMENT|NOT_FOUND): .*no-such-type/);
      return true;
    });
    await assert.rejects(client.getFlowType("no-such-type"), /^DexError: NOT_FOUND: .*no-such-type/);
    await assert.rejects(client.registerFlowType("name: broken\nsteps: []\n"), (error: unknown) => {
      assert.ok(error instanceof DexError);
      assert.equal(error.code, "INVALID_ARGUMENT");
      assert.match(error.message, /broken/);
      return true;
    });
    await assert.rejects(client.registerFlowType("{not yaml: ["), /^DexError: INVALID_ARGUMENT: /);
    await assert.rejects(client.cancelFlow("no-such-flow"), /NOT_FOUND/);
    await assert.rejects(client.waitFlow("no-such-flow", { timeoutMs: 100 }), /NOT_FOUND/);
    await assert.rejects(client.startFlow({ flowType: "one-step", input: { big: 1n } }), /INVALID_ARGUMENT: startFlow: input/);
  });

  test("bad addresses are refused before anything is sent, naming the entry", () => {
    assert.throws(() => new Client({ addresses: ["127.0.0.1:0"] }), /invalid server address '127.0.0.1:0': the port/);
    assert.throws(() => new Client({ addresses: ["localhost"] }), /use host:port/);
    assert.throws(
      () => new Client({ addresses: ["127.0.0.1:1", "127.0.0.1:1"] }),
      /'127.0.0.1:1' is listed twice/,
    );
    assert.throws(() => new Client({ addresses: ["::1:80"] }), /put an IPv6 address in brackets/);
    assert.throws(() => new Worker({ addresses: [] , address: "a b:1"}), /the host may hold only/);
    new Client({ addresses: ["[::1]:8801", "dex-1.internal:8801"] }).close();
  });

  test("a server that is not there fails fast with UNAVAILABLE naming the address", async () => {
    const port = await freePort();
    const nowhere = new Client({ addresses: [`127.0.0.1:${port}`], timeoutMs: 10_000 });
    const t0 = Date.now();
    try {
      await assert.rejects(nowhere.getFlow("x"), (error: unknown) => {
        assert.ok(error instanceof DexError);
        assert.equal(error.code, "UNAVAILABLE");
        assert.match(error.message, new RegExp(`^UNAVAILABLE: the server is not reachable at 127\\.0\\.0\\.1:${port}`));
        return true;
      });
      // The 1.5 s grace for a restarting server, not the 10 s deadline.
      const took = Date.now() - t0;
      assert.ok(took >= 1_400 && took < 5_000, `took ${took} ms`);
    } finally {
      nowhere.close();
    }
  });
});
