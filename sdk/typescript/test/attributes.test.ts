// Attributes, lock keys and RPCs without a server: their declaration in the
// Flow, the values' checks and encodings, what a Step or RPC task reads and
// writes through the task runner, and bad use with clear errors.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Attribute,
  AttributeMap,
  Channel,
  Flow,
  Rpc,
  Wait,
  gracefulComplete,
  runFlowTask,
  stepOptionsToWire,
  type Codec,
  type Step,
} from "../src/index";
import type { WireAttribute, WireFlowTask, WirePayload } from "../src/proto";
import { invalidArgument, json, text, wireTask } from "./task-fixture";

const never = new AbortController().signal;
const noBeat = (): boolean => false;

const task = (over: Partial<WireFlowTask>): WireFlowTask =>
  wireTask({ taskId: "t1", flowType: "Shop", stepType: "Tally", stepExecutionId: "Tally-1" }, over);

const status = Attribute.string("status");
const total = Attribute.int64("total");
const ratio = Attribute.double("ratio");
const paid = Attribute.bool("paid");
const due = Attribute.datetime("due");
interface Cart {
  items: string[];
}
const cart = Attribute.json<Cart>("cart");
const blob = Attribute.bytes("blob");
const seats = AttributeMap.int64("seats");
const events = new Channel<string>("events");

describe("Attribute declarations", () => {
  test("the Flow declares each Attribute's type and map-ness; Steps and RPCs read every key unless they name fewer", () => {
    const a: Step = { type: "A", execute: () => gracefulComplete() };
    const b: Step = { type: "B", attributeReads: [status, "seats"], execute: () => gracefulComplete() };
    const none: Step = { type: "N", attributeReads: [], execute: () => gracefulComplete() };
    const flow = new Flow({
      type: "Shop",
      startStep: a,
      steps: [a, b, none],
      attributes: [status, total, ratio, paid, due, cart, blob, seats],
      rpcs: [
        { name: "reserve", lockKeys: ["inventory"], attributeReads: [seats], handler: () => ({ output: 1 }) },
        new Rpc({ name: "peek", handler: () => undefined }),
      ],
    });
    const d = flow.declaration();
    assert.deepEqual(d.attributes, [
      { key: "status", type: "ATTRIBUTE_STRING", isMap: false },
      { key: "total", type: "ATTRIBUTE_INT64", isMap: false },
      { key: "ratio", type: "ATTRIBUTE_DOUBLE", isMap: false },
      { key: "paid", type: "ATTRIBUTE_BOOL", isMap: false },
      { key: "due", type: "ATTRIBUTE_DATETIME", isMap: false },
      { key: "cart", type: "ATTRIBUTE_JSON", isMap: false },
      { key: "blob", type: "ATTRIBUTE_BYTES", isMap: false },
      { key: "seats", type: "ATTRIBUTE_INT64", isMap: true },
    ]);
    const all = ["status", "total", "ratio", "paid", "due", "cart", "blob", "seats"];
    assert.deepEqual(
      d.steps.map((s) => [s.stepType, s.attributeReads]),
      [
        ["A", all],
        ["B", ["status", "seats"]],
        ["N", []],
      ],
    );
    assert.deepEqual(d.rpcs, [
      { name: "reserve", lockKeys: ["inventory"], attributeReads: ["seats"] },
      { name: "peek", lockKeys: [], attributeReads: all },
    ]);
  });

  test("lock keys in method options and defaults", () => {
    assert.deepEqual(stepOptionsToWire({ waitFor: { lockKeys: ["a"] }, execute: { lockKeys: ["a", "b"], attemptTimeoutMs: 5 } }), {
      waitFor: { lockKeys: ["a"] },
      execute: { attemptTimeoutMs: 5, lockKeys: ["a", "b"] },
    });
    const s: Step = { type: "S", options: { execute: { lockKeys: ["own"] } }, execute: () => gracefulComplete() };
    const t: Step = { type: "T", execute: () => gracefulComplete() };
    const flow = new Flow({ type: "L", startStep: s, steps: [s, t], defaultStepOptions: { execute: { lockKeys: ["shared"] } } });
    assert.deepEqual(
      flow.declaration().steps.map((x) => x.options.execute?.lockKeys),
      [["own"], ["shared"]],
    );
    assert.throws(() => stepOptionsToWire({ execute: { lockKeys: ["a", "a"] } }), invalidArgument(/execute\.lockKeys lists 'a' twice/));
    assert.throws(() => stepOptionsToWire({ execute: { lockKeys: [""] } }), invalidArgument(/lockKeys\[0\] must be a non-empty string/));
    const seventeen = Array.from({ length: 17 }, (_, i) => `k${i}`);
    assert.throws(() => stepOptionsToWire({ waitFor: { lockKeys: seventeen } }), invalidArgument(/waitFor\.lockKeys has 17 keys; the limit is 16/));
    assert.throws(() => new Rpc({ name: "r", lockKeys: "k" as unknown as string[], handler: () => undefined }), invalidArgument(/RPC 'r': lockKeys must be an array/));
  });

  test("bad declarations say what is wrong", () => {
    const a: Step = { type: "A", execute: () => gracefulComplete() };
    assert.throws(() => new Flow({ type: "F", startStep: a, steps: [a], attributes: [status, Attribute.int64("status")] }), invalidArgument(/declares the Attribute 'status' twice/));
    assert.throws(
      () => new Flow({ type: "F", startStep: a, steps: [{ ...a, attributeReads: ["nope"] }], attributes: [status] }),
      invalidArgument(/Step 'A' reads the Attribute 'nope', which its Flow does not declare \(its Attributes: status\)/),
    );
    assert.throws(
      () => new Flow({ type: "F", startStep: a, steps: [a], rpcs: [{ name: "r", attributeReads: [total], handler: () => undefined }] }),
      invalidArgument(/RPC 'r' reads the Attribute 'total', which its Flow does not declare/),
    );
    assert.throws(
      () => new Flow({ type: "F", startStep: a, steps: [a], rpcs: [{ name: "r", handler: () => undefined }, { name: "r", handler: () => undefined }] }),
      invalidArgument(/declares the RPC 'r' twice/),
    );
    assert.throws(() => new Flow({ type: "F", startStep: a, steps: [a], attributes: [events as never] }), invalidArgument(/not an Attribute or AttributeMap/));
    assert.throws(() => new Rpc({ name: "r" } as never), invalidArgument(/RPC 'r': handler is not a function/));
    assert.throws(() => new Attribute("k", "float" as never), invalidArgument(/Attribute 'k': the type must be one of string, int64/));
    assert.throws(() => Attribute.string(""), invalidArgument(/an Attribute key must be a non-empty string/));
  });

  test("Client writes check their values' types", () => {
    assert.deepEqual(total.write(7), { key: "total", instanceKey: "", type: "int64", value: 7 });
    assert.deepEqual(seats.write("A1", 2), { key: "seats", instanceKey: "A1", type: "int64", value: 2 });
    assert.deepEqual(seats.removal("A1"), { key: "seats", instanceKey: "A1", type: "int64", value: undefined });
    assert.throws(() => total.write(1.5), invalidArgument(/'total' is a int64 Attribute; it takes an integer number within/));
    assert.throws(() => total.write(2 ** 60), invalidArgument(/an integer number within \+-\(2\^53 - 1\)/));
    assert.throws(() => status.write(3 as unknown as string), invalidArgument(/'status' is a string Attribute; it takes a string, not a number/));
    assert.throws(() => due.write(new Date(Number.NaN)), invalidArgument(/takes a valid Date/));
    assert.throws(() => cart.write(new Uint8Array(2) as never), invalidArgument(/takes a JSON value \(an object, an array, a string, a finite number, a boolean or null\), not a Uint8Array/));
    assert.throws(() => blob.write("x" as never), invalidArgument(/takes a Uint8Array/));
    assert.throws(() => seats.write("", 1), invalidArgument(/an instance key of AttributeMap 'seats' must be a non-empty string/));
  });
});

describe("Attributes in Step tasks", () => {
  const carried: WireAttribute[] = [
    { key: "status", instanceKey: "", value: { stringValue: "new", value: "stringValue" } },
    { key: "total", instanceKey: "", value: { int64Value: 40, value: "int64Value" } },
    { key: "due", instanceKey: "", value: { datetimeUnixMs: 1_700_000_000_000, value: "datetimeUnixMs" } },
    { key: "cart", instanceKey: "", value: { jsonValue: '{"items":["a"]}', value: "jsonValue" } },
    { key: "blob", instanceKey: "", value: { bytesValue: Buffer.from([1, 2]), value: "bytesValue" } },
    { key: "seats", instanceKey: "A1", value: { int64Value: 1, value: "int64Value" } },
    { key: "seats", instanceKey: "B2", value: { int64Value: 3, value: "int64Value" } },
  ];

  test("get reads the carried values, get after set sees the new value, writes go in the result in order", async () => {
    let seen: unknown;
    const tally: Step = {
      type: "Tally",
      execute(ctx) {
        const before = {
          status: status.get(ctx),
          total: total.get(ctx),
          paid: paid.get(ctx),
          due: due.get(ctx)?.getTime(),
          cart: cart.get(ctx),
          blob: [...(blob.get(ctx) ?? [])],
          a1: seats.get(ctx, "A1"),
          all: [...seats.entries(ctx)],
        };
        status.set(ctx, "tallied");
        total.set(ctx, (total.get(ctx) ?? 0) + 2);
        seats.set(ctx, "C3", 5);
        seats.remove(ctx, "A1");
        paid.set(ctx, true);
        ratio.set(ctx, 0.5);
        due.set(ctx, new Date(5));
        cart.set(ctx, { items: ["a", "b"] });
        blob.set(ctx, new Uint8Array([9]));
        blob.remove(ctx);
        seen = {
          before,
          after: { status: status.get(ctx), total: total.get(ctx), a1: seats.get(ctx, "A1"), all: [...seats.entries(ctx)], blob: blob.get(ctx) },
        };
        return gracefulComplete();
      },
    };
    const flow = new Flow({ type: "Shop", startStep: tally, steps: [tally], attributes: [status, total, ratio, paid, due, cart, blob, seats] });
    const result = await runFlowTask(flow, task({ attributes: carried }), never, noBeat);
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    assert.deepEqual(seen, {
      before: {
        status: "new",
        total: 40,
        paid: undefined,
        due: 1_700_000_000_000,
        cart: { items: ["a"] },
        blob: [1, 2],
        a1: 1,
        all: [
          ["A1", 1],
          ["B2", 3],
        ],
      },
      after: {
        status: "tallied",
        total: 42,
        a1: undefined,
        all: [
          ["B2", 3],
          ["C3", 5],
        ],
        blob: undefined,
      },
    });
    assert.deepEqual(result.attributeWrites, [
      { key: "status", instanceKey: "", value: { stringValue: "tallied" } },
      { key: "total", instanceKey: "", value: { int64Value: 42 } },
      { key: "seats", instanceKey: "C3", value: { int64Value: 5 } },
      { key: "seats", instanceKey: "A1" },
      { key: "paid", instanceKey: "", value: { boolValue: true } },
      { key: "ratio", instanceKey: "", value: { doubleValue: 0.5 } },
      { key: "due", instanceKey: "", value: { datetimeUnixMs: 5 } },
      { key: "cart", instanceKey: "", value: { jsonValue: '{"items":["a","b"]}' } },
      { key: "blob", instanceKey: "", value: { bytesValue: Buffer.from([9]) } },
      { key: "blob", instanceKey: "" },
    ]);
  });

  test("waitFor writes Attributes too; a failed attempt and a task without writes send none", async () => {
    const s: Step = {
      type: "Tally",
      waitFor(ctx) {
        status.set(ctx, "waiting");
        if (ctx.attempt === 2) throw new Error("flaky");
        return Wait.anyOf(events.forOne());
      },
      execute: () => gracefulComplete(),
    };
    const flow = new Flow({ type: "Shop", startStep: s, steps: [s], attributes: [status], channels: [events] });
    const waited = await runFlowTask(flow, task({ method: "WAIT_FOR" }), never, noBeat);
    assert.equal(waited.wait?.conditions.length, 1);
    assert.deepEqual(waited.attributeWrites, [{ key: "status", instanceKey: "", value: { stringValue: "waiting" } }]);
    const failed = await runFlowTask(flow, task({ method: "WAIT_FOR", attempt: 2 }), never, noBeat);
    assert.equal(failed.error?.message, "flaky");
    assert.equal(failed.attributeWrites, undefined);
    const plain = await runFlowTask(flow, task({}), never, noBeat);
    assert.equal(plain.attributeWrites, undefined);
  });

  test("reads outside the Step's attributeReads fail naming the key; undeclared keys and wrong kinds fail", async () => {
    const run = async (body: Step["execute"], reads?: (string | Attribute<any>)[]): Promise<string> => {
      const s: Step = { type: "Tally", execute: body, ...(reads === undefined ? {} : { attributeReads: reads }) };
      const flow = new Flow({ type: "Shop", startStep: s, steps: [s], attributes: [status, total, seats] });
      const r = await runFlowTask(flow, task({ attributes: carried }), never, noBeat);
      assert.equal(r.error?.nonRetryable, true, JSON.stringify(r));
      return r.error?.message ?? "";
    };
    assert.match(
      await run((ctx) => gracefulComplete(total.get(ctx)), [status]),
      /Step 'Tally-1' reads the Attribute 'total', which is not among its attributeReads \(status\): add it there/,
    );
    assert.match(await run((ctx) => gracefulComplete(seats.entries(ctx)), ["total"]), /reads the Attribute 'seats', which is not among its attributeReads \(total\)/);
    assert.match(await run((ctx) => gracefulComplete(paid.get(ctx))), /Step 'Tally-1' reads the Attribute 'paid', which its Flow does not declare \(its Attributes: status, total, seats\)/);
    assert.match(
      await run((ctx) => {
        paid.set(ctx, true);
        return gracefulComplete();
      }),
      /writes the Attribute 'paid', which its Flow does not declare/,
    );
    assert.match(
      await run((ctx) => {
        total.set(ctx, "x" as unknown as number);
        return gracefulComplete();
      }),
      /the Attribute 'total' is a int64 Attribute; it takes an integer number/,
    );
    assert.match(
      await run((ctx) => {
        Attribute.string("total").set(ctx, "x");
        return gracefulComplete();
      }),
      /writes 'total' as a string, but its Flow declares it int64/,
    );
    assert.match(
      await run((ctx) => {
        Attribute.int64("seats").set(ctx, 1);
        return gracefulComplete();
      }),
      /writes the AttributeMap 'seats' without an instance key/,
    );
    // What the task wrote itself it may read back, even outside its reads.
    const s: Step = {
      type: "Tally",
      attributeReads: [],
      execute(ctx) {
        total.set(ctx, 9);
        return gracefulComplete(total.get(ctx));
      },
    };
    const flow = new Flow({ type: "Shop", startStep: s, steps: [s], attributes: [total] });
    const r = await runFlowTask(flow, task({}), never, noBeat);
    assert.equal(text(r.decision?.gracefulComplete), "9");
  });

  test("a carried value of the wrong type, or an int64 beyond the safe integers, fails the attempt", async () => {
    const s: Step = { type: "Tally", execute: () => gracefulComplete() };
    const flow = new Flow({ type: "Shop", startStep: s, steps: [s], attributes: [status, total] });
    const wrong = await runFlowTask(flow, task({ attributes: [{ key: "status", instanceKey: "", value: { boolValue: true, value: "boolValue" } }] }), never, noBeat);
    assert.match(wrong.error?.message ?? "", /carries the Attribute 'status' as a bool, but it is declared string/);
    const huge = await runFlowTask(flow, task({ attributes: [{ key: "total", instanceKey: "", value: { int64Value: 2 ** 60, value: "int64Value" } }] }), never, noBeat);
    assert.match(huge.error?.message ?? "", /the Attribute 'total' holds the int64 \d+, beyond what a JavaScript number keeps exactly/);
  });
});

describe("RPC tasks", () => {
  const ship: Step<{ n: number }> = { type: "Ship", execute: (ctx) => gracefulComplete(ctx.input) };
  const upper: Codec<string> = {
    encode: (v) => Buffer.from(v.toUpperCase()),
    decode: (d) => Buffer.from(d).toString().toLowerCase(),
  };

  test("the handler gets the input and the Attributes it reads; its output, next Steps, writes and publishes form the result", async () => {
    const reserve = new Rpc<{ seat: string }, { left: number }>({
      name: "reserve",
      lockKeys: ["inventory"],
      attributeReads: [seats],
      handler(ctx, input) {
        assert.equal(ctx.rpcId, "rpc:7.1");
        assert.equal(ctx.rpcName, "reserve");
        assert.equal(ctx.flowId, "f-1");
        assert.deepEqual(ctx.input, input);
        const left = (seats.get(ctx, input.seat) ?? 0) - 1;
        seats.set(ctx, input.seat, left);
        ctx.publish(events, `reserved ${input.seat}`);
        return { output: { left }, nextSteps: [{ step: ship, input: { n: left } }] };
      },
    });
    const flow = new Flow({ type: "Shop", startStep: ship, steps: [ship], attributes: [status, seats], channels: [events], rpcs: [reserve] });
    const result = await runFlowTask(
      flow,
      task({
        method: "RPC",
        stepType: "",
        stepExecutionId: "rpc:7.1",
        rpcName: "reserve",
        input: json({ seat: "B2" }),
        attributes: [{ key: "seats", instanceKey: "B2", value: { int64Value: 3, value: "int64Value" } }],
      }),
      never,
      noBeat,
    );
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    assert.equal(text(result.rpc?.output), '{"left":2}');
    assert.deepEqual(result.rpc?.nextSteps.map((m) => [m.stepType, text(m.input)]), [["Ship", '{"n":2}']]);
    assert.deepEqual(result.attributeWrites, [{ key: "seats", instanceKey: "B2", value: { int64Value: 2 } }]);
    assert.deepEqual(result.publishes?.map((p) => [p.channel, p.messages.map(text)]), [["events", ['"reserved B2"']]]);
  });

  test("codecs; no return value is an empty output; errors carry the thrown message", async () => {
    const shout = new Rpc<string, string>({ name: "shout", inputCodec: upper, outputCodec: upper, handler: (_ctx, input) => ({ output: `${input}!` }) });
    const quiet = new Rpc({ name: "quiet", handler: () => undefined });
    const fails = new Rpc({
      name: "fails",
      handler: (ctx) => {
        status.get(ctx);
        throw new Error("no seats left");
      },
    });
    const bad = new Rpc({ name: "bad", handler: () => 5 as never });
    const lost = new Rpc({ name: "lost", handler: () => ({ nextSteps: [{ step: "Nowhere" }] }) });
    const narrow = new Rpc({ name: "narrow", attributeReads: [], handler: (ctx) => ({ output: status.get(ctx) }) });
    const flow = new Flow({ type: "Shop", startStep: ship, steps: [ship], attributes: [status], rpcs: [shout, quiet, fails, bad, lost, narrow] });
    const rpcTask = (name: string, input: WirePayload = json(null)): WireFlowTask =>
      task({ method: "RPC", stepType: "", stepExecutionId: "rpc:1.1", rpcName: name, input });

    const shouted = await runFlowTask(flow, rpcTask("shout", { data: Buffer.from("HEY") }), never, noBeat);
    assert.equal(text(shouted.rpc?.output), "HEY!");
    const quieted = await runFlowTask(flow, rpcTask("quiet"), never, noBeat);
    assert.deepEqual(quieted.rpc, { output: { data: Buffer.alloc(0) }, nextSteps: [] });
    assert.deepEqual((await runFlowTask(flow, rpcTask("fails"), never, noBeat)).error, { message: "no seats left", nonRetryable: false });
    assert.match((await runFlowTask(flow, rpcTask("bad"), never, noBeat)).error?.message ?? "", /handler of RPC 'bad' returned a number, not \{ output, nextSteps \}/);
    assert.match(
      (await runFlowTask(flow, rpcTask("lost"), never, noBeat)).error?.message ?? "",
      /RPC 'lost' decided goTo 'Nowhere', which Flow 'Shop' does not declare/,
    );
    assert.match(
      (await runFlowTask(flow, rpcTask("narrow"), never, noBeat)).error?.message ?? "",
      /RPC 'narrow' reads the Attribute 'status', which is not among its attributeReads \(none\)/,
    );
    assert.match(
      (await runFlowTask(flow, rpcTask("missing"), never, noBeat)).error?.message ?? "",
      /Flow type 'Shop' in this Worker has no RPC 'missing'/,
    );
    assert.match(
      (await runFlowTask(flow, rpcTask("quiet", { data: Buffer.from("{") }), never, noBeat)).error?.message ?? "",
      /the input of RPC 'quiet' cannot be decoded/,
    );
  });

  test("a publish to an undeclared Channel from an RPC names the RPC", async () => {
    const loud = new Rpc({ name: "loud", handler: (ctx) => void ctx.publish(new Channel("elsewhere"), 1) });
    const flow = new Flow({ type: "Shop", startStep: ship, steps: [ship], rpcs: [loud], channels: [events] });
    const r = await runFlowTask(flow, task({ method: "RPC", stepExecutionId: "rpc:1.2", rpcName: "loud" }), never, noBeat);
    assert.match(r.error?.message ?? "", /RPC 'loud' publishes to the Channel 'elsewhere', which Flow 'Shop' does not declare/);
  });
});
