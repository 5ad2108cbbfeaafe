// The Client against a real dex-server-zd dev: what it says when a call
// fails (the gRPC code, what went wrong, which address), its AbortSignal, its
// check of the addresses, and AdminService.Describe.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, DexError, Flow, Timer, Wait, Worker, deadEnd, goTo, type Step } from "../src/index";
import { DevServer, freePort, MemoryLogger } from "./helpers";

// A run of it waits ten minutes for nothing: it is RUNNING until stopped.
const sleeper: Step = { type: "Sleep", waitFor: () => Wait.anyOf(Timer.after(600_000)), execute: () => deadEnd() };
const start: Step = { type: "Start", execute: () => goTo(sleeper) };
const idle = new Flow({ type: "ClientIdle", startStep: start, steps: [start, sleeper] });

describe("Client", () => {
  let server: DevServer;
  let client: Client;
  let worker: Worker;

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(idle);
    void worker.run();
    await worker.ready();
  });

  after(async () => {
    client?.close();
    await worker?.shutdown();
    await server?.stop();
  });

  test("waitForFlow stops at once when its AbortSignal aborts", async () => {
    await client.startFlow(idle, "client-abort");
    const controller = new AbortController();
    const t0 = Date.now();
    setTimeout(() => controller.abort(new Error("caller gave up")), 200);
    await assert.rejects(client.waitForFlow("client-abort", { signal: controller.signal }), /caller gave up/);
    assert.ok(Date.now() - t0 < 3_000, `took ${Date.now() - t0} ms`);
    // An aborted signal fails any call before it is sent.
    await assert.rejects(client.describeFlow("client-abort", { signal: controller.signal }), /caller gave up/);
    assert.equal((await client.describeFlow("client-abort")).status, "RUNNING");
    await client.stopFlow("client-abort");
  });

  test("describe names the active process", async () => {
    const node = await client.describe();
    assert.equal(node.nodeId, "dev");
    assert.match(node.nodeEpoch, /^[1-9][0-9]*$/);
    assert.notEqual(node.holderProcessId, "");
  });

  test("errors name the code and say what went wrong", async () => {
    await assert.rejects(client.describeFlow("no-such-flow"), (error: unknown) => {
      assert.ok(error instanceof DexError);
      assert.equal(error.code, "NOT_FOUND");
      assert.equal(error.grpcCode, 5);
      assert.equal(error.address, server.address);
      assert.match(error.message, /^NOT_FOUND: .*no-such-flow/);
      return true;
    });
    await assert.rejects(client.startFlow("NoSuchType", "x-1"), (error: unknown) => {
      assert.ok(error instanceof DexError);
      assert.match(error.message, /^INVALID_ARGUMENT: .*NoSuchType/);
      return true;
    });
    await assert.rejects(client.stopFlow("no-such-flow"), /^DexError: NOT_FOUND: .*no-such-flow/);
    await assert.rejects(client.waitForFlow("no-such-flow", { timeoutMs: 100 }), /NOT_FOUND/);
    // Refused by the Client before anything is sent.
    await assert.rejects(client.startFlow(idle, "big", { big: 1n }), /INVALID_ARGUMENT: startFlow: input/);
    await assert.rejects(client.startFlow(idle, ""), /INVALID_ARGUMENT: startFlow: the Flow ID must be a non-empty string/);
    await assert.rejects(
      client.publishToChannel("x", "c", "not an array" as unknown as string[]),
      /INVALID_ARGUMENT: publishToChannel: messages must be an array/,
    );
    await assert.rejects(client.waitForFlow("x", { timeoutMs: -1 }), /INVALID_ARGUMENT: timeoutMs must not be negative/);
  });

  test("bad addresses are refused before anything is sent, naming the entry", () => {
    assert.throws(() => new Client({ addresses: ["127.0.0.1:0"] }), /invalid server address '127.0.0.1:0': the port/);
    assert.throws(() => new Client({ addresses: ["localhost"] }), /use host:port/);
    assert.throws(
      () => new Client({ addresses: ["127.0.0.1:1", "127.0.0.1:1"] }),
      /'127.0.0.1:1' is listed twice/,
    );
    assert.throws(() => new Client({ addresses: ["::1:80"] }), /put an IPv6 address in brackets/);
    assert.throws(() => new Worker({ addresses: [], address: "a b:1" }), /the host may hold only/);
    new Client({ addresses: ["[::1]:8801", "dex-1.internal:8801"] }).close();
  });

  test("a server that is not there fails fast with UNAVAILABLE naming the address", async () => {
    const port = await freePort();
    const nowhere = new Client({ addresses: [`127.0.0.1:${port}`], timeoutMs: 10_000 });
    const t0 = Date.now();
    try {
      await assert.rejects(nowhere.describeFlow("x"), (error: unknown) => {
        assert.ok(error instanceof DexError);
        assert.equal(error.code, "UNAVAILABLE");
        assert.match(error.message, new RegExp(`^UNAVAILABLE: the server is not reachable at 127\\.0\\.0\\.1:${port}`));
        return true;
      });
      // The 1.5 s grace for a restarting server, not the 10 s deadline: this
      // Client never reached a process of the node.
      const took = Date.now() - t0;
      assert.ok(took >= 1_400 && took < 5_000, `took ${took} ms`);
    } finally {
      nowhere.close();
    }
    // After close(), calls reject with CANCELLED.
    await assert.rejects(nowhere.describeFlow("x"), /^DexError: CANCELLED: the client is closed/);
  });
});
