// The Attribute Store in the TypeScript SDK, without a dex server: synced
// Attributes (`{ sync: true }`, with or without an index; an AttributeMap
// cannot sync, a compile-time error and a declaration-time one), a Flow's
// default store (FlowDefinition.attributeStore), a start's store
// (RunStartOptions.attributeStore) for Client.startFlow and SubFlow children,
// and what the Worker's hello and the Client's StartFlow carry over the wire
// to the in-process gRPC server of fake-dex.ts.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Attribute, AttributeMap, Client, Flow, SubFlow, Worker, gracefulComplete, type Step } from "../src/index";
import { FakeDex } from "./fake-dex";
import { eventually, MemoryLogger } from "./helpers";
import { invalidArgument } from "./task-fixture";

const step: Step = { type: "A", execute: () => gracefulComplete() };
const stage = Attribute.string("stage", { sync: true });
const customer = Attribute.string("customer", { index: "keyword", indexKey: "Customer", sync: true });
const items = Attribute.int64("items", { index: "int", sync: true });
const cart = Attribute.json<{ items: string[] }>("cart", { sync: true });
const tags = Attribute.json("tags", { index: "keywordArray", sync: true });
const blob = Attribute.bytes("blob", { sync: true });
const note = Attribute.string("note");
const seats = AttributeMap.int64("seats");

describe("synced Attribute declarations", () => {
  test("sync: true marks an Attribute synced, with or without an index; the default is not", () => {
    assert.deepEqual(
      [stage, customer, items, cart, tags, blob, note].map((a) => [a.key, a.sync, a.index?.type]),
      [
        ["stage", true, undefined],
        ["customer", true, "keyword"],
        ["items", true, "int"],
        ["cart", true, undefined],
        ["tags", true, "keywordArray"],
        ["blob", true, undefined],
        ["note", false, undefined],
      ],
    );
    assert.equal(Attribute.bool("paid", { sync: false }).sync, false);
    assert.equal(new Attribute("total", "double", { sync: true }).sync, true);
    // The value types still follow the index (checked by the compiler).
    const tagList: Attribute<string[]> = tags;
    const cartObject: Attribute<{ items: string[] }> = cart;
    assert.ok(tagList && cartObject);
    if (false as boolean) {
      // @ts-expect-error an AttributeMap cannot sync
      AttributeMap.string("x", { sync: true });
      // @ts-expect-error an AttributeMap cannot sync (not even with sync: false spelled out)
      AttributeMap.int64("x", { sync: false });
      // @ts-expect-error sync is a boolean
      Attribute.string("x", { sync: "yes" });
      // @ts-expect-error an index key needs an index, synced or not
      Attribute.string("x", { indexKey: "X", sync: true });
      // @ts-expect-error bytes cannot be indexed, synced or not
      Attribute.bytes("x", { index: "keyword", sync: true });
    }
  });

  test("a synced AttributeMap, or a sync that is not a boolean, is refused when declared, naming it", () => {
    for (const make of [
      () => AttributeMap.string("m", { sync: true } as never),
      () => new AttributeMap("m", "int64", { sync: true } as never),
      () => AttributeMap.json("m", { sync: 1 } as never),
    ]) {
      assert.throws(make, invalidArgument(/^INVALID_ARGUMENT: AttributeMap 'm' cannot sync: only plain Attributes sync to the Attribute Store \(one column each\)$/));
    }
    assert.equal(AttributeMap.string("m", { sync: false } as never).key, "m", "sync: false asks nothing of a map");
    assert.throws(() => AttributeMap.string("m", { index: "keyword", sync: true } as never), invalidArgument(/AttributeMap 'm' cannot be indexed/));
    assert.throws(() => Attribute.string("s", { sync: "yes" } as never), invalidArgument(/^INVALID_ARGUMENT: Attribute 's': sync must be true or false, not a string$/));
    // The index checks still apply to a synced Attribute.
    assert.throws(() => Attribute.string("status", { index: "keyword", sync: true }), invalidArgument(/is the system field 'Status'/));
  });

  test("a Flow declares each synced Attribute and its attributeStore; a bad store name is refused", () => {
    const flow = new Flow({ type: "Orders", startStep: step, steps: [step], attributes: [stage, customer, note, seats], attributeStore: "orders" });
    assert.equal(flow.attributeStore, "orders");
    const d = flow.declaration();
    assert.equal(d.attributeStore, "orders");
    assert.deepEqual(
      d.attributes.map((a) => [a.key, a.isMap, a.sync]),
      [
        ["stage", false, true],
        ["customer", false, true],
        ["note", false, undefined],
        ["seats", true, undefined],
      ],
    );
    // Without a store, the declaration is what it was before.
    const plain = new Flow({ type: "Plain", startStep: step, steps: [step], attributes: [note] }).declaration();
    assert.equal(Object.hasOwn(plain, "attributeStore"), false);
    assert.equal(Object.hasOwn(plain.attributes[0], "sync"), false);
    assert.throws(
      () => new Flow({ type: "Orders", startStep: step, steps: [step], attributeStore: "" }),
      invalidArgument(/^INVALID_ARGUMENT: Flow 'Orders': attributeStore must be a non-empty string$/),
    );
    assert.throws(
      () => new Flow({ type: "Orders", startStep: step, steps: [step], attributeStore: "a\nb" }),
      invalidArgument(/Flow 'Orders': attributeStore 'a\nb' contains a control character/),
    );
  });

  test("a SubFlow's child takes an attributeStore, the start's over the SubFlow's own", () => {
    const sub = new SubFlow("Child", { options: { attributeStore: "children" } });
    assert.equal(sub.start(1).spec.subFlow?.options?.attributeStore, "children");
    assert.equal(sub.start(1, { attributeStore: "audit" }).spec.subFlow?.options?.attributeStore, "audit");
    assert.equal(Object.hasOwn(new SubFlow("Child").start(1).spec.subFlow?.options ?? {}, "attributeStore"), false);
    assert.throws(() => sub.start(1, { attributeStore: "x".repeat(256) }), invalidArgument(/attributeStore 'x+\.\.\.' is longer than 255 bytes/));
  });
});

describe("the Attribute Store over the wire", () => {
  let fake: FakeDex;
  let client: Client;

  before(async () => {
    fake = new FakeDex();
    await fake.start();
    client = new Client({ addresses: [fake.address], timeoutMs: 5_000 });
  });
  after(() => {
    client?.close();
    fake?.stop();
  });

  test("a Worker's hello carries each Attribute's sync and the Flow's attributeStore", async () => {
    const flow = new Flow({ type: "Orders", startStep: step, steps: [step], attributes: [stage, customer, note, seats], attributeStore: "orders" });
    const worker = new Worker({ addresses: [fake.address], logger: new MemoryLogger() }).host(flow);
    const running = worker.run();
    await worker.ready();
    await eventually("the hello", () => fake.hellos.length > 0);
    const declared = fake.hellos.at(-1).flows[0];
    assert.equal(declared.attributeStore, "orders");
    assert.deepEqual(
      declared.attributes.map((a: any) => [a.key, a.isMap, a.sync, a.index?.indexKey]),
      [
        ["stage", false, true, undefined],
        ["customer", false, true, "Customer"],
        ["note", false, false, undefined],
        ["seats", true, false, undefined],
      ],
    );
    await worker.shutdown();
    await running;
  });

  test("startFlow sends the start's attributeStore, none when not given; a bad one is refused before sending", async () => {
    fake.answers.set("StartFlow", () => ({ runId: "r-1", alreadyStarted: false }));
    await client.startFlow("Orders", "o-1", {}, { attributeStore: "orders-eu", initialAttributes: [stage.write("new")] });
    const sent = fake.lastCall("StartFlow");
    assert.equal(sent.options.attributeStore, "orders-eu");
    assert.equal(sent.options.initialAttributes[0].key, "stage");
    await client.startFlow("Orders", "o-2", {});
    assert.equal(fake.lastCall("StartFlow").options.attributeStore, "", "empty: the declaration's store");
    await assert.rejects(client.startFlow("Orders", "o-3", {}, { attributeStore: "a\tb" }), invalidArgument(/^INVALID_ARGUMENT: startFlow: attributeStore 'a\tb' contains a control character$/));
    assert.equal(fake.lastCall("StartFlow").flowId, "o-2");
  });
});
