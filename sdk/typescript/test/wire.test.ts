// Attributes, lock keys and RPCs over the wire, against an in-process gRPC
// server that speaks dex's protocol (api.proto) instead of a dex server: what
// the Worker declares and answers to RPC and Step tasks, what the Client's
// calls send, how it decodes the answers, and which codes its errors keep.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import {
  Attribute,
  AttributeMap,
  Channel,
  Client,
  DexError,
  Flow,
  Rpc,
  Worker,
  gracefulComplete,
  type Codec,
  type Step,
} from "../src/index";
import { FakeDex } from "./fake-dex";
import { MemoryLogger } from "./helpers";

const stage = Attribute.string("stage");
const total = Attribute.int64("total");
const due = Attribute.datetime("due");
const cart = Attribute.json<{ items: string[] }>("cart");
const blob = Attribute.bytes("blob");
const ratio = Attribute.double("ratio");
const done = Attribute.bool("done");
const seats = AttributeMap.int64("seats");
const audit = new Channel<string>("audit");

const ship: Step<{ seat: string }> = {
  type: "Ship",
  attributeReads: [stage, seats],
  options: { execute: { lockKeys: ["inventory"] } },
  execute(ctx) {
    stage.set(ctx, `shipping ${ctx.input.seat} from ${stage.get(ctx) ?? "?"}`);
    seats.remove(ctx, ctx.input.seat);
    return gracefulComplete({ seats: [...seats.entries(ctx)] });
  },
};
const reserve = new Rpc<{ seat: string }, { left: number }>({
  name: "reserve",
  lockKeys: ["inventory"],
  attributeReads: [seats, due],
  handler(ctx, input) {
    const left = (seats.get(ctx, input.seat) ?? 0) - 1;
    if (left < 0) throw new Error(`no seats left in ${input.seat}`);
    seats.set(ctx, input.seat, left);
    due.set(ctx, new Date((due.get(ctx)?.getTime() ?? 0) + 1000));
    blob.set(ctx, new Uint8Array([7, 8]));
    ctx.publish(audit, `reserved ${input.seat}`);
    return { output: { left }, nextSteps: [{ step: ship, input: { seat: input.seat } }] };
  },
});
const SHOP = new Flow({
  type: "Shop",
  startStep: ship,
  steps: [ship],
  channels: [audit],
  attributes: [stage, total, due, cart, blob, ratio, done, seats],
  rpcs: [reserve],
});

describe("over the wire, against an in-process server", () => {
  let fake: FakeDex;
  let worker: Worker;
  let client: Client;

  before(async () => {
    fake = new FakeDex();
    await fake.start();
    worker = new Worker({ addresses: [fake.address], logger: new MemoryLogger(), shutdownTimeoutMs: 2_000 }).host(SHOP);
    void worker.run();
    await worker.ready();
    client = new Client({ addresses: [fake.address], timeoutMs: 2_000 });
  });

  after(async () => {
    client?.close();
    await worker?.shutdown();
    fake?.stop();
  });

  test("the hello declares the Attributes, each Step's and RPC's reads and lock keys", () => {
    const flow = fake.hellos[0].flows[0];
    assert.deepEqual(
      flow.attributes.map((a: any) => [a.key, a.type, a.isMap]),
      [
        ["stage", "ATTRIBUTE_STRING", false],
        ["total", "ATTRIBUTE_INT64", false],
        ["due", "ATTRIBUTE_DATETIME", false],
        ["cart", "ATTRIBUTE_JSON", false],
        ["blob", "ATTRIBUTE_BYTES", false],
        ["ratio", "ATTRIBUTE_DOUBLE", false],
        ["done", "ATTRIBUTE_BOOL", false],
        ["seats", "ATTRIBUTE_INT64", true],
      ],
    );
    assert.deepEqual(flow.steps[0].attributeReads, ["stage", "seats"]);
    assert.deepEqual(flow.steps[0].options.execute.lockKeys, ["inventory"]);
    assert.deepEqual(flow.rpcs, [{ name: "reserve", lockKeys: ["inventory"], attributeReads: ["seats", "due"] }]);
  });

  test("the Worker runs an RPC task: output, next Steps, Attribute writes and publishes; a throw is the error", async () => {
    const rpcTask = (seat: string): Record<string, unknown> => ({
      method: "RPC",
      stepExecutionId: "rpc:1.4",
      rpcName: "reserve",
      input: { data: Buffer.from(JSON.stringify({ seat })) },
      attributes: [
        { key: "due", value: { datetimeUnixMs: 5_000 } },
        { key: "seats", instanceKey: "A1", value: { int64Value: 2 } },
      ],
    });
    const r = await fake.task(rpcTask("A1"));
    assert.equal(r.result, "rpc", JSON.stringify(r));
    assert.equal(Buffer.from(r.rpc.output.data).toString(), '{"left":1}');
    assert.deepEqual(
      r.rpc.nextSteps.map((m: any) => [m.stepType, Buffer.from(m.input.data).toString()]),
      [["Ship", '{"seat":"A1"}']],
    );
    assert.deepEqual(
      r.attributeWrites.map((w: any) => [w.key, w.instanceKey, w.value.value, w.value[w.value.value]]),
      [
        ["seats", "A1", "int64Value", 1],
        ["due", "", "datetimeUnixMs", 6_000],
        ["blob", "", "bytesValue", Buffer.from([7, 8])],
      ],
    );
    assert.deepEqual(r.publishes.map((p: any) => [p.channel, p.messages.map((m: any) => Buffer.from(m.data).toString())]), [["audit", ['"reserved A1"']]]);

    const failed = await fake.task(rpcTask("B9"));
    assert.equal(failed.result, "error");
    assert.equal(failed.error.message, "no seats left in B9");
    assert.deepEqual(failed.attributeWrites, []);
  });

  test("the Worker runs a Step task with the Attributes it carries and sends its writes in order", async () => {
    const r = await fake.task({
      method: "EXECUTE",
      stepType: "Ship",
      stepExecutionId: "Ship-1",
      scheduledBy: "rpc:reserve",
      input: { data: Buffer.from('{"seat":"A1"}') },
      attributes: [
        { key: "stage", value: { stringValue: "packed" } },
        { key: "seats", instanceKey: "A1", value: { int64Value: 1 } },
        { key: "seats", instanceKey: "B2", value: { int64Value: 4 } },
      ],
    });
    assert.equal(r.result, "decision", JSON.stringify(r));
    assert.equal(Buffer.from(r.decision.gracefulComplete.data).toString(), '{"seats":[["B2",4]]}');
    assert.deepEqual(
      r.attributeWrites.map((w: any) => [w.key, w.instanceKey, w.value?.stringValue ?? null]),
      [
        ["stage", "", "shipping A1 from packed"],
        ["seats", "A1", null],
      ],
    );
  });

  test("getAttributes decodes every type; typed reads check the type", async () => {
    fake.answers.set("GetAttributes", () => ({
      runId: "r-7",
      status: "FLOW_RUNNING",
      attributes: [
        { key: "blob", value: { bytesValue: Buffer.from([1, 2, 3]) } },
        { key: "cart", value: { jsonValue: '{"items":["x"]}' } },
        { key: "done", value: { boolValue: true } },
        { key: "due", value: { datetimeUnixMs: 1_700_000_000_123 } },
        { key: "ratio", value: { doubleValue: 0.25 } },
        { key: "seats", instanceKey: "A1", value: { int64Value: 3 } },
        { key: "seats", instanceKey: "B2", value: { int64Value: -9_007_199_254_740_991 } },
        { key: "stage", value: { stringValue: "packed" } },
      ],
    }));
    const a = await client.getAttributes("f-1", { keys: [stage, "seats", blob, cart, done, due, ratio], runId: "r-7" });
    assert.deepEqual(fake.lastCall("GetAttributes"), {
      flow: { flowId: "f-1", runId: "r-7" },
      keys: ["stage", "seats", "blob", "cart", "done", "due", "ratio"],
    });
    assert.equal(a.runId, "r-7");
    assert.equal(a.status, "RUNNING");
    assert.equal(a.get(stage), "packed");
    assert.deepEqual([...(a.get(blob) ?? [])], [1, 2, 3]);
    assert.deepEqual(a.get(cart), { items: ["x"] });
    assert.equal(a.get(done), true);
    assert.equal(a.get(due)?.toISOString(), "2023-11-14T22:13:20.123Z");
    assert.equal(a.get(ratio), 0.25);
    assert.equal(a.get(seats, "B2"), -9_007_199_254_740_991);
    assert.equal(a.get(total), undefined);
    assert.deepEqual([...a.instances(seats)], [
      ["A1", 3],
      ["B2", -9_007_199_254_740_991],
    ]);
    assert.deepEqual(a.entries.map((e) => [e.key, e.type]).slice(0, 2), [
      ["blob", "bytes"],
      ["cart", "json"],
    ]);
    assert.throws(() => a.get(Attribute.int64("stage")), /INVALID_ARGUMENT: the run's Attribute 'stage' is a string, not a int64/);
  });

  test("setAttributes and a start's initial Attributes send typed writes in order; removals only where allowed", async () => {
    fake.answers.set("SetAttributes", () => ({ runId: "r-2" }));
    const set = await client.setAttributes("f-1", [total.write(2 ** 53 - 1), seats.write("A1", 4), stage.removal(), due.write(new Date(42))]);
    assert.deepEqual(set, { runId: "r-2" });
    const sent = fake.lastCall("SetAttributes");
    assert.deepEqual(sent.flow, { flowId: "f-1", runId: "" });
    assert.deepEqual(
      sent.writes.map((w: any) => [w.key, w.instanceKey, w.value?.value ?? null, w.value?.[w.value.value] ?? null]),
      [
        ["total", "", "int64Value", 2 ** 53 - 1],
        ["seats", "A1", "int64Value", 4],
        ["stage", "", null, null],
        ["due", "", "datetimeUnixMs", 42],
      ],
    );
    fake.answers.set("StartFlow", () => ({ runId: "r-3", alreadyStarted: false }));
    await client.startFlow(SHOP, "f-3", { seat: "A1" }, { initialAttributes: [stage.write("new"), cart.write({ items: ["a"] })] });
    assert.deepEqual(
      fake.lastCall("StartFlow").options.initialAttributes.map((w: any) => [w.key, w.value[w.value.value]]),
      [
        ["stage", "new"],
        ["cart", '{"items":["a"]}'],
      ],
    );
    await assert.rejects(client.startFlow(SHOP, "f-4", null, { initialAttributes: [stage.removal()] }), /INVALID_ARGUMENT: startFlow: initialAttributes\[0\] deletes 'stage'/);
    await assert.rejects(client.setAttributes("f-1", [{ key: "stage" } as never]), /INVALID_ARGUMENT: setAttributes\[0\] is not a write/);
  });

  test("waitForAttribute sends the scalar it waits for and answers whether it matched", async () => {
    fake.answers.set("WaitForAttribute", () => ({ matched: true, current: { int64Value: 4 }, status: "FLOW_RUNNING" }));
    const r = await client.waitForAttribute("f-1", seats, 4, { instanceKey: "A1", timeoutMs: 1_000 });
    assert.deepEqual(r, { matched: true, current: 4, status: "RUNNING" });
    const sent = fake.lastCall("WaitForAttribute");
    assert.equal(sent.key, "seats");
    assert.equal(sent.instanceKey, "A1");
    assert.equal(sent.value.int64Value, 4);
    assert.ok(sent.timeoutMs > 0 && sent.timeoutMs <= 1_000, String(sent.timeoutMs));
    // The run closed first: no match, and no further wait.
    fake.answers.set("WaitForAttribute", () => ({ matched: false, current: { stringValue: "packed" }, status: "FLOW_COMPLETED" }));
    assert.deepEqual(await client.waitForAttribute("f-1", stage, "shipped"), { matched: false, current: "packed", status: "COMPLETED" });
    await assert.rejects(client.waitForAttribute("f-1", cart, { items: [] }), /INVALID_ARGUMENT: waitForAttribute: 'cart' is a json Attribute; only scalars/);
    await assert.rejects(client.waitForAttribute("f-1", seats, 1), /INVALID_ARGUMENT: waitForAttribute: the AttributeMap 'seats' needs an instanceKey/);
  });

  test("invokeRpc sends the name, encoded input, timeout and request ID, and decodes the output with the Rpc's codec", async () => {
    fake.answers.set("InvokeRpc", (req) => ({ runId: "r-5", output: { data: Buffer.from(JSON.stringify({ left: JSON.parse(Buffer.from(req.input.data).toString()).seat.length })) } }));
    const r = await client.invokeRpc("f-1", reserve, { seat: "A12" }, { timeoutMs: 3_000, requestId: "req-1", runId: "r-5" });
    assert.deepEqual(r, { runId: "r-5", output: { left: 3 } });
    const sent = fake.lastCall("InvokeRpc");
    assert.deepEqual(sent.flow, { flowId: "f-1", runId: "r-5" });
    assert.equal(sent.name, "reserve");
    assert.equal(sent.requestId, "req-1");
    assert.ok(sent.timeoutMs > 2_900 && sent.timeoutMs <= 3_000, String(sent.timeoutMs));

    const reversed: Codec<string> = {
      encode: (v) => Buffer.from([...v].reverse().join("")),
      decode: (d) => [...Buffer.from(d).toString()].reverse().join(""),
    };
    fake.answers.set("InvokeRpc", (req) => ({ runId: "r-5", output: req.input }));
    const echoed = await client.invokeRpc<string, string>("f-1", "echo", "abc", { codecs: { input: reversed, output: reversed } });
    assert.equal(Buffer.from(fake.lastCall("InvokeRpc").input.data).toString(), "cba");
    assert.equal(echoed.output, "abc");
    assert.equal(fake.lastCall("InvokeRpc").timeoutMs > 9_000, true); // the default 10 s
    assert.match(fake.lastCall("InvokeRpc").requestId, /^[0-9a-f]{32}$/);
    fake.answers.set("InvokeRpc", () => ({ runId: "r-5", output: { data: Buffer.alloc(0) } }));
    assert.equal((await client.invokeRpc("f-1", "empty")).output, null);
    fake.answers.set("InvokeRpc", () => ({ runId: "r-5", output: { data: Buffer.from("not json") } }));
    await assert.rejects(client.invokeRpc("f-1", "raw"), /INVALID_ARGUMENT: the output of RPC 'raw' cannot be decoded/);

    await assert.rejects(client.invokeRpc("f-1", "x", null, { timeoutMs: 60_001 }), /INVALID_ARGUMENT: invokeRpc: timeoutMs must be more than 0 and at most 60000/);
    await assert.rejects(client.invokeRpc("f-1", "x", 10n), /INVALID_ARGUMENT: invokeRpc: the input of RPC 'x' cannot be encoded/);
  });

  test("history events of RPCs, Attribute writes and locks; a task waiting for a lock", async () => {
    fake.answers.set("GetHistoryEvents", () => ({
      runId: "r-1",
      more: false,
      events: [
        { seq: 4, kind: "LOCKS_ACQUIRED", stepExecutionId: "rpc:1.4", method: "RPC", lockKeys: ["inventory"] },
        {
          seq: 5,
          kind: "RPC_COMPLETED",
          stepExecutionId: "rpc:1.4",
          rpcName: "reserve",
          output: { data: Buffer.from('{"left":1}') },
          attributeWrites: [{ key: "seats", instanceKey: "A1", value: { int64Value: 1 } }, { key: "blob" }],
        },
        { seq: 6, kind: "ATTRIBUTES_SET", attributeWrites: [{ key: "stage", value: { stringValue: "closing" } }] },
        { seq: 7, kind: "RPC_FAILED", stepExecutionId: "rpc:1.5", rpcName: "reserve", error: "no seats left in A1" },
      ],
    }));
    const page = await client.getHistoryEvents("f-1");
    const [locks, completed, set, failed] = page.events;
    assert.deepEqual([locks?.kind, locks?.method, locks?.lockKeys], ["LOCKS_ACQUIRED", "RPC", ["inventory"]]);
    assert.deepEqual([completed?.kind, completed?.rpcName, completed?.output], ["RPC_COMPLETED", "reserve", { left: 1 }]);
    assert.deepEqual(completed?.attributeWrites, [
      { key: "seats", instanceKey: "A1", type: "int64", value: 1 },
      { key: "blob", instanceKey: "", type: undefined, value: undefined },
    ]);
    assert.deepEqual(set?.attributeWrites.map((w) => [w.key, w.value]), [["stage", "closing"]]);
    assert.deepEqual([failed?.kind, failed?.rpcName, failed?.error], ["RPC_FAILED", "reserve", "no seats left in A1"]);

    fake.answers.set("GetFlowState", () => ({
      flow: { flowId: "f-1", runId: "r-1", status: "FLOW_RUNNING" },
      active: [{ stepExecutionId: "Ship-2", stepType: "Ship", phase: "PHASE_EXECUTE", method: "EXECUTE", taskState: "TASK_LOCKED" }],
      workers: [],
    }));
    const state = await client.getFlowState("f-1");
    assert.equal(state.active[0]?.taskState, "LOCKED");
  });

  test("invokeRpc's errors keep the server's code and message", async () => {
    const failWith = (code: grpc.status, details: string) => () => ({ error: { code, details } });
    const rejectsWith = async (code: string, pattern: RegExp): Promise<void> => {
      await assert.rejects(client.invokeRpc("f-1", reserve, { seat: "A1" }, { timeoutMs: 300 }), (e: unknown) => {
        assert.ok(e instanceof DexError, String(e));
        assert.equal(e.code, code);
        assert.match(e.message, pattern);
        return true;
      });
    };
    fake.answers.set("InvokeRpc", failWith(grpc.status.FAILED_PRECONDITION, "RPC reserve failed: no seats left in A1"));
    await rejectsWith("FAILED_PRECONDITION", /^FAILED_PRECONDITION: RPC reserve failed: no seats left in A1$/);
    fake.answers.set("InvokeRpc", failWith(grpc.status.INVALID_ARGUMENT, "Flow type Shop declares no RPC 'reserve'"));
    await rejectsWith("INVALID_ARGUMENT", /^INVALID_ARGUMENT: Flow type Shop declares no RPC 'reserve'$/);
    fake.answers.set("InvokeRpc", failWith(grpc.status.DEADLINE_EXCEEDED, "the RPC did not complete within 300 ms"));
    await rejectsWith("DEADLINE_EXCEEDED", /^DEADLINE_EXCEEDED: RPC 'reserve' of f-1 did not complete within 300ms \(its outcome is unknown; a retry with request ID '[0-9a-f]{32}' answers it if it was committed\): .*the RPC did not complete within 300 ms/);

    // UNAVAILABLE (another process took over before the result was
    // committed) is asked again with the same request ID until the deadline.
    const before = fake.calls.length;
    fake.answers.set("InvokeRpc", failWith(grpc.status.UNAVAILABLE, "the active process changed before the RPC's result was committed"));
    await rejectsWith("UNAVAILABLE", /^UNAVAILABLE: the server at .* is not serving: the active process changed/);
    const tries = fake.calls.slice(before).filter((c) => c.method === "InvokeRpc").map((c) => c.request);
    assert.ok(tries.length >= 2, `${tries.length} tries`);
    assert.equal(new Set(tries.map((t) => t.requestId)).size, 1);
    assert.ok(tries.every((t) => t.timeoutMs >= 1 && t.timeoutMs <= 300));
  });
});
