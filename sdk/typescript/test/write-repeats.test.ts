// Which calls the Client sends again after UNAVAILABLE, and with what request
// ID, against the in-process gRPC server of fake-dex.ts: every write it
// repeats carries a request ID, the same on each try (the server remembers it
// per run, so a repeat of a write that landed changes nothing); reads and
// long polls are asked again; a start the server would not recognise as a
// repeat is sent once.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { Attribute, Client, DexError } from "../src/index";
import { FakeDex } from "./fake-dex";

const stage = Attribute.string("stage");
const HEX_ID = /^[0-9a-f]{32}$/;

/** A write of the Client, and what the fake answers it once it succeeds. */
interface Write {
  method: string;
  answer: unknown;
  send: (client: Client, requestId?: string) => Promise<unknown>;
  /** Where the request carries its request ID. */
  idOf: (request: any) => string;
}

const withId = (requestId: string | undefined): { requestId?: string } => (requestId === undefined ? {} : { requestId });

// The writes that carry a request ID since the server deduplicates them.
const NEW_WRITES: Write[] = [
  {
    method: "SetAttributes",
    answer: { runId: "r-1" },
    send: (c, id) => c.setAttributes("f-1", [stage.write("paid")], withId(id)),
    idOf: (r) => r.requestId,
  },
  {
    method: "StopFlow",
    answer: {},
    send: (c, id) => c.stopFlow("f-1", { mode: "fail", reason: "no stock", ...withId(id) }),
    idOf: (r) => r.requestId,
  },
  {
    method: "SkipTimer",
    answer: {},
    send: (c, id) => c.skipTimer("f-1", "Remind-1", "reminder", withId(id)),
    idOf: (r) => r.requestId,
  },
  {
    // A repeat of one that landed answers the run it made (alreadyDone).
    method: "TimeTravel",
    answer: { runId: "r-2", alreadyDone: false },
    send: (c, id) => c.timeTravel("f-1", "r-1", { stepType: "Charge" }, withId(id)),
    idOf: (r) => r.requestId,
  },
];

// The writes that carried one before.
const OLD_WRITES: Write[] = [
  {
    method: "StartFlow",
    answer: { runId: "r-1", alreadyStarted: false },
    send: (c, id) => c.startFlow("Shop", "f-1", { cart: 1 }, id === undefined ? {} : { requestId: id, ignoreAlreadyStarted: true }),
    idOf: (r) => r.options.requestId,
  },
  {
    method: "PublishToChannel",
    answer: {},
    send: (c, id) => c.publishToChannel("f-1", "audit", ["paid"], withId(id)),
    idOf: (r) => r.requestId,
  },
  {
    method: "InvokeRpc",
    answer: { runId: "r-1", output: { data: Buffer.from("1") } },
    send: (c, id) => c.invokeRpc("f-1", "reserve", { seat: "A1" }, withId(id)),
    idOf: (r) => r.requestId,
  },
];

describe("the Client's repeats after UNAVAILABLE", () => {
  const fake = new FakeDex();
  let client: Client;

  before(async () => {
    await fake.start();
    client = new Client({ addresses: [fake.address], timeoutMs: 5_000 });
  });
  after(() => {
    client.close();
    fake.stop();
  });

  /**
   * Answers the first `failures` calls of `method` from now with UNAVAILABLE
   * (what a process says that lost its lease after the write may have
   * landed), then `answer`; the tries' requests come from the returned function.
   */
  function unavailableFirst(
    method: string,
    answer: unknown,
    failures = 1,
    error = { code: grpc.status.UNAVAILABLE, details: "the process lost its lease; the write's outcome is unknown" },
  ): () => any[] {
    const from = fake.calls.length;
    let seen = 0;
    fake.answers.set(method, () => (++seen <= failures ? { error } : answer));
    return () => fake.calls.slice(from).filter((c) => c.method === method).map((c) => c.request);
  }

  for (const write of NEW_WRITES) {
    test(`${write.method} sends a random request ID, the same on its repeat after UNAVAILABLE`, async () => {
      const tries = unavailableFirst(write.method, write.answer);
      await write.send(client);
      const ids = tries().map(write.idOf);
      assert.equal(ids.length, 2, `${ids.length} tries`);
      assert.match(ids[0] ?? "", HEX_ID);
      assert.equal(ids[1], ids[0]);

      // Another call: another ID.
      const next = unavailableFirst(write.method, write.answer, 0);
      await write.send(client);
      const [other] = next().map(write.idOf);
      assert.match(other ?? "", HEX_ID);
      assert.notEqual(other, ids[0]);
    });

    test(`${write.method} sends a given requestId as is, on every try; a bad one is refused before anything is sent`, async () => {
      const tries = unavailableFirst(write.method, write.answer, 2);
      await write.send(client, `${write.method}-order-17`);
      assert.deepEqual(tries().map(write.idOf), Array(3).fill(`${write.method}-order-17`));

      // "" is as good as none: a random one.
      const empty = unavailableFirst(write.method, write.answer, 0);
      await write.send(client, "");
      assert.match(empty().map(write.idOf)[0] ?? "", HEX_ID);

      const before = fake.calls.length;
      for (const [bad, why] of [
        ["a\nb", /contains a control character/],
        ["x".repeat(256), /longer than 255 bytes/],
      ] as const) {
        await assert.rejects(write.send(client, bad), (e: unknown) => {
          assert.ok(e instanceof DexError, String(e));
          assert.equal(e.code, "INVALID_ARGUMENT");
          assert.match(e.message, /requestId/);
          assert.match(e.message, why);
          return true;
        });
      }
      assert.equal(fake.calls.length, before, "nothing was sent");
    });
  }

  test("StopFlow, SkipTimer and SetAttributes send their other fields next to the request ID", async () => {
    for (const write of NEW_WRITES) fake.answers.set(write.method, () => write.answer);
    await client.stopFlow("f-1", { mode: "fail", reason: "no stock", runId: "r-3", requestId: "s-1" });
    assert.deepEqual(fake.lastCall("StopFlow"), { flowId: "f-1", runId: "r-3", mode: "STOP_FAIL", reason: "no stock", requestId: "s-1" });
    await client.skipTimer("f-1", "Remind-1", 2, { requestId: "k-1" });
    const skip = fake.lastCall("SkipTimer");
    assert.deepEqual([skip.flow, skip.stepExecutionId, skip.conditionIndex, skip.requestId], [{ flowId: "f-1", runId: "" }, "Remind-1", 2, "k-1"]);
    assert.deepEqual(await client.setAttributes("f-1", [stage.write("paid")], { requestId: "a-1" }), { runId: "r-1" });
    const set = fake.lastCall("SetAttributes");
    assert.deepEqual([set.writes.map((w: any) => [w.key, w.value.stringValue]), set.requestId], [[["stage", "paid"]], "a-1"]);
  });

  for (const write of OLD_WRITES) {
    test(`${write.method} keeps its request ID across its repeat after UNAVAILABLE, and a given one as is`, async () => {
      const tries = unavailableFirst(write.method, write.answer);
      await write.send(client);
      const ids = tries().map(write.idOf);
      assert.equal(ids.length, 2, `${ids.length} tries`);
      assert.match(ids[0] ?? "", HEX_ID);
      assert.equal(ids[1], ids[0]);

      const given = unavailableFirst(write.method, write.answer);
      await write.send(client, "given-1");
      assert.deepEqual(given().map(write.idOf), ["given-1", "given-1"]);
    });
  }

  test("a start with a given requestId and without ignoreAlreadyStarted is sent once: UNAVAILABLE ends it", async () => {
    // The server recognises a repeated start only under ignoreAlreadyStarted;
    // a repeat could otherwise start a second run or terminate the first.
    const tries = unavailableFirst("StartFlow", { runId: "r-1", alreadyStarted: false }, 1);
    await assert.rejects(client.startFlow("Shop", "f-1", 1, { requestId: "once-1", idReusePolicy: "terminateIfRunning" }), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "UNAVAILABLE");
      assert.match(e.message, /lost its lease/);
      return true;
    });
    assert.equal(tries().length, 1);
    assert.equal(tries()[0].options.ignoreAlreadyStarted, false);
  });

  test("startFlowAndWait repeats its start after UNAVAILABLE with the same request ID and waits in the repeat", async () => {
    const closed = { flowId: "f-1", runId: "r-1", status: "FLOW_COMPLETED", outputs: [] };
    const tries = unavailableFirst("StartFlow", { runId: "r-1", alreadyStarted: true, closed: true, flow: closed });
    const done = await client.startFlowAndWait("Shop", "f-1", { cart: 1 }, { waitTimeoutMs: 5_000 });
    assert.deepEqual([done.runId, done.alreadyStarted, done.flow.status], ["r-1", true, "COMPLETED"]);
    const sent = tries();
    assert.equal(sent.length, 2, `${sent.length} tries`);
    assert.match(sent[0].options.requestId, HEX_ID);
    assert.equal(sent[1].options.requestId, sent[0].options.requestId);
    for (const r of sent) {
      assert.equal(r.options.ignoreAlreadyStarted, true);
      assert.ok(Number(r.waitTimeoutMs) > 0 && Number(r.waitTimeoutMs) <= 5_000, String(r.waitTimeoutMs));
    }

    // Given a requestId without ignoreAlreadyStarted: sent once, as startFlow.
    const once = unavailableFirst("StartFlow", { runId: "r-1", alreadyStarted: false, closed: true, flow: closed });
    await assert.rejects(client.startFlowAndWait("Shop", "f-1", 1, { requestId: "once-3" }), (e: unknown) => e instanceof DexError && e.code === "UNAVAILABLE");
    assert.equal(once().length, 1);

    // A negative wait is refused before anything is sent.
    const before = fake.calls.length;
    await assert.rejects(client.startFlowAndWait("Shop", "f-1", 1, { waitTimeoutMs: -1 }), (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT" && /waitTimeoutMs/.test(e.message));
    assert.equal(fake.calls.length, before);
  });

  test("reads and long polls are asked again after UNAVAILABLE", async () => {
    const describeTries = unavailableFirst("DescribeFlow", { flowId: "f-1", runId: "r-1", status: "FLOW_RUNNING" }, 2);
    assert.equal((await client.describeFlow("f-1")).status, "RUNNING");
    assert.equal(describeTries().length, 3);

    const attributeTries = unavailableFirst("GetAttributes", { runId: "r-1", status: "FLOW_RUNNING", attributes: [] });
    await client.getAttributes("f-1");
    assert.equal(attributeTries().length, 2);

    const waitTries = unavailableFirst("WaitForFlow", { closed: true, flow: { flowId: "f-1", runId: "r-1", status: "FLOW_COMPLETED" } });
    assert.equal((await client.waitForFlow("f-1", { timeoutMs: 5_000 })).status, "COMPLETED");
    assert.equal(waitTries().length, 2);
  });

  test("a CANCELLED from the server (its listener replaced, or the process dying) is asked again, except by a call sent once", async () => {
    const cancelled = { code: grpc.status.CANCELLED, details: "CANCELLED" };
    const waitTries = unavailableFirst("WaitForFlow", { closed: true, flow: { flowId: "f-1", runId: "r-1", status: "FLOW_COMPLETED" } }, 1, cancelled);
    assert.equal((await client.waitForFlow("f-1", { timeoutMs: 5_000 })).status, "COMPLETED");
    assert.equal(waitTries().length, 2);

    const setTries = unavailableFirst("SetAttributes", { runId: "r-1" }, 1, cancelled);
    await client.setAttributes("f-1", [stage.write("paid")]);
    const ids = setTries().map((r) => r.requestId);
    assert.equal(ids.length, 2);
    assert.equal(ids[1], ids[0]);

    const startTries = unavailableFirst("StartFlow", { runId: "r-1", alreadyStarted: false }, 1, cancelled);
    await assert.rejects(client.startFlow("Shop", "f-1", 1, { requestId: "once-2", idReusePolicy: "terminateIfRunning" }), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "CANCELLED");
      return true;
    });
    assert.equal(startTries().length, 1);
  });

  test("a write's DEADLINE_EXCEEDED names the request ID that a repeat must carry", async () => {
    fake.answers.set("SetAttributes", () => ({ error: { code: grpc.status.DEADLINE_EXCEEDED, details: "the write was not durable in time" } }));
    await assert.rejects(client.setAttributes("f-1", [stage.write("late")], { requestId: "late-1" }), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "DEADLINE_EXCEEDED");
      assert.match(e.message, /the outcome of the Attribute writes to f-1 is unknown; a repeat with request ID 'late-1' changes nothing if it landed/);
      return true;
    });
  });
});
