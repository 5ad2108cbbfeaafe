// json Attributes of any JSON value and bytes Attributes: the wire form of
// each kind, and against a real dex-server-zd dev a start's initial values, a
// Step's writes, an RPC's reads and writes and a Client's writes of arrays,
// strings, numbers, booleans and null, and of bytes with zeros and non-UTF-8,
// all read back as written by the next Step, the RPC and the Client. JSON null
// is a value (undefined deletes); JSON the server cannot take is refused.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Attribute,
  AttributeMap,
  Channel,
  Client,
  DexError,
  Flow,
  Rpc,
  TaskError,
  Wait,
  Worker,
  goTo,
  gracefulComplete,
  type JsonValue,
  type Step,
} from "../src/index";
import { attributeValueFromWire, attributeValueToWire } from "../src/flow/attributes";
import { DevServer, eventually, MemoryLogger } from "./helpers";

const KINDS: ReadonlyArray<readonly [string, JsonValue]> = [
  ["object", { a: [1, { b: null }], c: "d" }],
  ["array", [1, "two", false, null, {}, []]],
  ["empty-array", []],
  ["string", "h\u00e9llo \u{1F600}"],
  ["empty-string", ""],
  ["integer", -42],
  ["double", 2.5],
  ["true", true],
  ["false", false],
  ["null", null],
];

// Zeros, every byte value, an invalid UTF-8 sequence.
function everyByte(): Buffer {
  const b = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) b[i] = i;
  return Buffer.concat([b, Buffer.from([0x00, 0xc3, 0x28, 0xff, 0x00])]);
}

const doc = Attribute.json<JsonValue>("doc");
const docs = AttributeMap.json<JsonValue>("docs");
const raw = Attribute.bytes("raw");
const raws = AttributeMap.bytes("raws");
const done = new Channel("done");

const same = (a: unknown, b: unknown): boolean => {
  try {
    assert.deepStrictEqual(a, b);
    return true;
  } catch {
    return false;
  }
};

type Scope = Parameters<typeof doc.get>[0];

/** The instances under `prefix` that read back other than written. */
function mismatches(ctx: Scope, prefix: string): string[] {
  const out: string[] = [];
  for (const [kind, value] of KINDS) if (!same(docs.get(ctx, prefix + kind), value)) out.push(prefix + kind);
  if (!same(raws.get(ctx, `${prefix}bytes`), everyByte())) out.push(`${prefix}bytes`);
  if (!same(raws.get(ctx, `${prefix}empty`), Buffer.alloc(0))) out.push(`${prefix}empty`);
  return out;
}

function writeAll(ctx: Scope, prefix: string): void {
  for (const [kind, value] of KINDS) docs.set(ctx, prefix + kind, value);
  raws.set(ctx, `${prefix}bytes`, everyByte());
  raws.set(ctx, `${prefix}empty`, new Uint8Array(0));
}

const write: Step = {
  type: "Write",
  execute(ctx) {
    writeAll(ctx, "step-");
    doc.set(ctx, ["written", "by", "the", "step"]);
    raw.set(ctx, Buffer.alloc(16));
    return goTo("Check");
  },
};

// Checks what Write wrote, waits on "done", then completes with what differs
// of what the RPC and the Client wrote meanwhile.
const check: Step = {
  type: "Check",
  waitFor(ctx) {
    const found = mismatches(ctx, "step-");
    if (!same(doc.get(ctx), ["written", "by", "the", "step"])) found.push("doc");
    if (!same(raw.get(ctx), Buffer.alloc(16))) found.push("raw");
    if (found.length > 0) throw new TaskError(`Check read other values: ${found.join(", ")}`, { nonRetryable: true });
    return Wait.anyOf(done.forOne());
  },
  execute(ctx) {
    const found = [...mismatches(ctx, "client-"), ...mismatches(ctx, "rpc-")];
    if (doc.get(ctx) !== null) found.push("doc (JSON null from the RPC)");
    if (raw.get(ctx) !== undefined) found.push("raw (removed by the Client)");
    return gracefulComplete({ mismatches: found });
  },
};

const rewrite = new Rpc<null, { mismatches: string[]; doc: JsonValue | undefined }>({
  name: "rewrite",
  handler(ctx) {
    const found = mismatches(ctx, "step-");
    writeAll(ctx, "rpc-");
    doc.set(ctx, null);
    return { output: { mismatches: found, doc: doc.get(ctx) } };
  },
});

const VALUES = new Flow({
  type: "ts-values",
  startStep: write,
  steps: [write, check],
  channels: [done],
  attributes: [doc, docs, raw, raws],
  rpcs: [rewrite],
});

describe("json and bytes values on the wire", () => {
  test("every JSON kind is sent as its JSON text and read back; null is a value", () => {
    for (const [kind, value] of KINDS) {
      const wire = attributeValueToWire("json", value, kind);
      assert.deepEqual(wire, { jsonValue: JSON.stringify(value) }, kind);
      assert.deepEqual(attributeValueFromWire({ ...wire, value: "jsonValue" }, kind), value, kind);
    }
    assert.deepEqual(doc.write(null), { key: "doc", instanceKey: "", type: "json", value: null });
    assert.deepEqual(doc.removal(), { key: "doc", instanceKey: "", type: "json", value: undefined });
    assert.deepEqual(docs.write("n", null).value, null);
  });

  test("what is not a JSON value is refused naming the Attribute", () => {
    const refused = (value: unknown, pattern: RegExp): void =>
      assert.throws(
        () => doc.write(value as JsonValue),
        (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT" && pattern.test(e.message),
      );
    const wrong = /'doc' is a json Attribute; it takes a JSON value \(an object, an array, a string, a finite number, a boolean or null\)/;
    refused(undefined, wrong);
    refused(Number.NaN, wrong);
    refused(Number.POSITIVE_INFINITY, wrong);
    refused(() => 1, wrong);
    refused(Symbol("s"), wrong);
    refused(10n, wrong);
    refused(new Date(0), wrong);
    refused(Buffer.from("x"), wrong);
    refused({ big: 10n }, /'doc' is not JSON-serializable/);
  });

  test("bytes: any bytes, the empty ones included, go as they are", () => {
    const wire = attributeValueToWire("bytes", everyByte(), "raw");
    assert.ok(Buffer.from(wire.bytesValue as Uint8Array).equals(everyByte()));
    assert.deepEqual(attributeValueFromWire({ bytesValue: new Uint8Array(0), value: "bytesValue" }, "raw"), Buffer.alloc(0));
  });
});

describe("json and bytes Attributes on a dex server", () => {
  let server: DevServer;
  let client: Client;
  let worker: Worker;

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(VALUES);
    void worker.run();
    await worker.ready();
  });

  after(async () => {
    client?.close();
    await worker?.shutdown();
    await server?.stop();
  });

  const waitForCheck = (id: string): Promise<void> =>
    eventually(`${id}'s Check to wait`, async () => {
      const kinds: string[] = [];
      for await (const e of client.iterateHistoryEvents(id)) kinds.push(e.kind);
      if (kinds.includes("FLOW_CLOSED") || kinds.includes("WAIT_FOR_FAILED")) throw new Error(`${id} ended: ${kinds.join(", ")}`);
      return kinds.includes("WAIT_FOR_COMPLETED");
    });

  test("a Step, an RPC and a Client write and read every JSON kind and bytes", async () => {
    await client.startFlow(VALUES, "values-1", null, {
      initialAttributes: [doc.write("initial"), ...KINDS.map(([kind, value]) => docs.write(`start-${kind}`, value)), raws.write("start-bytes", everyByte())],
    });
    await waitForCheck("values-1");
    let a = await client.getAttributes("values-1");
    for (const [kind, value] of KINDS) {
      assert.deepEqual(a.get(docs, `start-${kind}`), value, kind);
      assert.deepEqual(a.get(docs, `step-${kind}`), value, kind);
    }
    assert.equal(a.get(docs, "start-null"), null, "JSON null is a value");
    assert.ok(Buffer.from(a.get(raws, "start-bytes") as Uint8Array).equals(everyByte()));
    assert.ok(Buffer.from(a.get(raws, "step-bytes") as Uint8Array).equals(everyByte()));
    assert.equal(a.get(raws, "step-empty")?.length, 0, "empty bytes are a value");
    assert.deepEqual(a.get(doc), ["written", "by", "the", "step"]);

    const rpc = await client.invokeRpc("values-1", rewrite, null);
    assert.deepEqual(rpc.output, { mismatches: [], doc: null });

    await client.setAttributes("values-1", [
      ...KINDS.map(([kind, value]) => docs.write(`client-${kind}`, value)),
      raws.write("client-bytes", everyByte()),
      raws.write("client-empty", new Uint8Array(0)),
      raw.removal(),
    ]);
    a = await client.getAttributes("values-1");
    for (const [kind, value] of KINDS) {
      assert.deepEqual(a.get(docs, `rpc-${kind}`), value, kind);
      assert.deepEqual(a.get(docs, `client-${kind}`), value, kind);
    }
    assert.equal(a.get(doc), null, "the RPC's JSON null");
    assert.equal(a.get(raw), undefined, "the Client's removal");
    const state = await client.getFlowState("values-1");
    assert.deepEqual(
      state.attributes.find((e) => e.key === "doc"),
      { key: "doc", instanceKey: "", type: "json", value: null, omittedBytes: 0 },
    );

    await client.publishToChannel("values-1", done, [{}]);
    const closed = await client.waitForFlow("values-1", { timeoutMs: 15_000 });
    assert.equal(closed.status, "COMPLETED", closed.closeReason);
    assert.deepEqual(closed.output, { mismatches: [] });
  });

  test("JSON the server cannot take is refused with INVALID_ARGUMENT naming the Attribute", async () => {
    await client.startFlow(VALUES, "values-2");
    await waitForCheck("values-2");
    let deep: JsonValue = 1;
    for (let i = 0; i < 101; i++) deep = [deep];
    await assert.rejects(client.setAttributes("values-2", [docs.write("ok", 1), doc.write(deep)]), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "INVALID_ARGUMENT");
      assert.match(e.message, /Attribute 'doc' is JSON nested deeper than 100 arrays and objects/);
      return true;
    });
    assert.equal((await client.getAttributes("values-2")).get(docs, "ok"), undefined, "all or nothing");
    await client.stopFlow("values-2");
  });
});
