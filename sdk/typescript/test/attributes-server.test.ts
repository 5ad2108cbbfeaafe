// Attributes, lock keys and RPCs against a real dex-server-zd dev: initial
// values, Steps reading and writing them, the Client's reads, writes and
// waits, RPCs (output, new Steps, writes, the error codes, a repeated
// request ID), lock keys keeping two attempts of one run apart, and values
// over 1 MiB (blobs on the server) in and out.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Attribute,
  AttributeMap,
  Client,
  DexError,
  Flow,
  Rpc,
  Timer,
  Wait,
  Worker,
  deadEnd,
  goToMulti,
  gracefulComplete,
  type Step,
} from "../src/index";
import { DevServer, MemoryLogger } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const stage = Attribute.string("stage");
const count = Attribute.int64("count");
const due = Attribute.datetime("due");
const cart = Attribute.json<{ items: string[] }>("cart");
const seats = AttributeMap.int64("seats");

// Keeps a run open until it is stopped: RPCs and Clients do the work.
const idle: Step = { type: "Idle", waitFor: () => Wait.anyOf(Timer.after(600_000)), execute: () => deadEnd() };
const tally: Step<{ by: number }> = {
  type: "Tally",
  attributeReads: [count, stage],
  execute(ctx) {
    count.set(ctx, (count.get(ctx) ?? 0) + ctx.input.by);
    stage.set(ctx, `tallied by ${ctx.scheduledBy}`);
    return deadEnd();
  },
};
let handlerRuns = 0;
const reserve = new Rpc<{ seat: string }, { left: number }>({
  name: "reserve",
  lockKeys: ["inventory"],
  attributeReads: [seats],
  handler(ctx, { seat }) {
    handlerRuns++;
    const left = (seats.get(ctx, seat) ?? 0) - 1;
    if (left < 0) throw new Error(`no seats left in ${seat}`);
    seats.set(ctx, seat, left);
    return { output: { left }, nextSteps: [{ step: tally, input: { by: 1 } }] };
  },
});
const slow = new Rpc({ name: "slow", handler: async () => void (await sleep(2_000)) });
const SHOP = new Flow({
  type: "ts-shop",
  startStep: idle,
  steps: [idle, tally],
  attributes: [stage, count, due, cart, seats],
  rpcs: [reserve, slow],
});

// Two Steps started at once, each holding the lock key "k" while it runs.
let running = 0;
let most = 0;
const locked = (type: string): Step => ({
  type,
  options: { execute: { lockKeys: ["k"] } },
  async execute() {
    most = Math.max(most, ++running);
    await sleep(300);
    running--;
    return gracefulComplete({ type });
  },
});
const fan: Step = { type: "Fan", execute: () => goToMulti({ step: "L1" }, { step: "L2" }) };
const LOCKS = new Flow({ type: "ts-locks", startStep: fan, steps: [fan, locked("L1"), locked("L2")] });

// Values over the server's blob threshold (256 KiB) and over the old 1 MiB limit: the Step reads
// a large input and writes a large Attribute and output; all come back whole.
const note = Attribute.string("note");
const echo: Step<{ text: string }> = {
  type: "Echo",
  execute(ctx) {
    note.set(ctx, ctx.input.text.toUpperCase());
    return gracefulComplete({ length: ctx.input.text.length, text: ctx.input.text });
  },
};
const BIG = new Flow({ type: "ts-big", startStep: echo, steps: [echo], attributes: [note] });

describe("Attributes, lock keys and RPCs on a dex server", () => {
  let server: DevServer;
  let client: Client;
  let worker: Worker;

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(SHOP).host(LOCKS).host(BIG);
    void worker.run();
    await worker.ready();
  });

  after(async () => {
    client?.close();
    await worker?.shutdown();
    await server?.stop();
  });

  test("initial values, Client writes and reads, a wait that matches", async () => {
    await client.startFlow(SHOP, "attrs-1", null, {
      initialAttributes: [stage.write("open"), due.write(new Date(1_700_000_000_000)), cart.write({ items: ["a"] }), seats.write("A1", 2)],
    });
    let a = await client.getAttributes("attrs-1");
    assert.equal(a.status, "RUNNING");
    assert.equal(a.get(stage), "open");
    assert.equal(a.get(due)?.getTime(), 1_700_000_000_000);
    assert.deepEqual(a.get(cart), { items: ["a"] });
    assert.deepEqual([...a.instances(seats)], [["A1", 2]]);
    // The state shows them too, in key order, decoded by their type.
    const state = await client.getFlowState("attrs-1");
    assert.deepEqual(
      state.attributes.map((e) => [e.key, e.instanceKey, e.value instanceof Date ? e.value.getTime() : e.value, e.omittedBytes]),
      [
        ["cart", "", { items: ["a"] }, 0],
        ["due", "", 1_700_000_000_000, 0],
        ["seats", "A1", 2, 0],
        ["stage", "", "open", 0],
      ],
    );
    const waiting = client.waitForAttribute("attrs-1", stage, "closing", { timeoutMs: 10_000 });
    await client.setAttributes("attrs-1", [stage.write("closing"), cart.removal(), seats.write("B2", 5)]);
    assert.deepEqual(await waiting, { matched: true, current: "closing", status: "RUNNING" });
    a = await client.getAttributes("attrs-1", { keys: [seats, cart] });
    assert.deepEqual(a.entries.map((e) => [e.key, e.instanceKey, e.value]), [
      ["seats", "A1", 2],
      ["seats", "B2", 5],
    ]);
    const missed = await client.waitForAttribute("attrs-1", stage, "never", { timeoutMs: 300 });
    assert.deepEqual(missed, { matched: false, current: "closing", status: "RUNNING" });
    await assert.rejects(client.setAttributes("attrs-1", [Attribute.string("undeclared").write("x")]), /INVALID_ARGUMENT: .*undeclared/);
    // A repeat of a write that landed (its answer lost) does not put its
    // value back over a later write: the run remembers its request ID.
    await client.setAttributes("attrs-1", [stage.write("packing")], { requestId: "set-packing" });
    await client.setAttributes("attrs-1", [stage.write("shipped")]);
    assert.deepEqual(await client.setAttributes("attrs-1", [stage.write("packing")], { requestId: "set-packing" }), { runId: a.runId });
    assert.equal((await client.getAttributes("attrs-1")).get(stage), "shipped");
    await client.stopFlow("attrs-1");
  });

  test("an RPC's output, new Step and writes; errors keep their codes; a repeated request ID answers the same output", async () => {
    await client.startFlow(SHOP, "rpc-1", null, { initialAttributes: [seats.write("A1", 1), count.write(10)] });
    const first = await client.invokeRpc("rpc-1", reserve, { seat: "A1" }, { requestId: "once" });
    assert.deepEqual(first.output, { left: 0 });
    const runs = handlerRuns;
    const again = await client.invokeRpc("rpc-1", reserve, { seat: "A1" }, { requestId: "once" });
    assert.deepEqual(again.output, { left: 0 });
    assert.equal(handlerRuns, runs, "the handler ran again for a committed request ID");
    const stageNow = await client.waitForAttribute("rpc-1", stage, "tallied by rpc:reserve", { timeoutMs: 10_000 });
    assert.equal(stageNow.matched, true, JSON.stringify(stageNow));
    const a = await client.getAttributes("rpc-1");
    assert.equal(a.get(count), 11);
    assert.equal(a.get(seats, "A1"), 0);

    const rejects = async (call: Promise<unknown>, code: string, pattern: RegExp): Promise<void> => {
      await assert.rejects(call, (e: unknown) => {
        assert.ok(e instanceof DexError, String(e));
        assert.equal(e.code, code, e.message);
        assert.match(e.message, pattern);
        return true;
      });
    };
    await rejects(client.invokeRpc("rpc-1", reserve, { seat: "A1" }), "FAILED_PRECONDITION", /no seats left in A1/);
    await rejects(client.invokeRpc("rpc-1", "nope", null), "INVALID_ARGUMENT", /nope/);
    await rejects(client.invokeRpc("rpc-1", slow, null, { timeoutMs: 500 }), "DEADLINE_EXCEEDED", /slow/);
    await client.stopFlow("rpc-1");
    await rejects(client.invokeRpc("rpc-1", reserve, { seat: "A1" }), "FAILED_PRECONDITION", /rpc-1|run/);
  });

  test("inputs, outputs and Attributes over 1 MiB travel as blobs and come back whole", async () => {
    const text = "abcdefghij".repeat(300_000); // 3,000,000 bytes
    await client.startFlow(BIG, "big-1", { text });
    const done = await client.waitForFlow("big-1", { timeoutMs: 30_000 });
    assert.equal(done.status, "COMPLETED", done.closeReason);
    const output = done.output as { length: number; text: string };
    assert.equal(output.length, text.length);
    assert.ok(output.text === text, "the output came back changed");
    const a = await client.getAttributes("big-1");
    assert.ok(a.get(note) === text.toUpperCase(), "the Attribute came back changed");
    // The state reads it back from its blob too (within the state's 8 MiB of values).
    const shown = (await client.getFlowState("big-1")).attributes.find((e) => e.key === note.key);
    assert.equal(shown?.omittedBytes, 0);
    assert.ok(shown?.value === text.toUpperCase(), "the state's Attribute came back changed");
  });

  test("two attempts holding the same lock key never run at once", async () => {
    most = 0;
    await client.startFlow(LOCKS, "locks-1");
    const done = await client.waitForFlow("locks-1", { timeoutMs: 15_000 });
    assert.equal(done.status, "COMPLETED", JSON.stringify(done));
    assert.equal(most, 1);
    const kinds: string[] = [];
    for await (const e of client.iterateHistoryEvents("locks-1")) kinds.push(e.kind);
    assert.ok(kinds.includes("LOCKS_ACQUIRED") && kinds.includes("LOCKS_RELEASED"), kinds.join(", "));
  });
});
