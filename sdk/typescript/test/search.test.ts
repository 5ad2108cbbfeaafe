// Finding Flows without a dex server: the index declarations of Attributes
// (which index types fit which Attribute types, index keys, the Flow's and the
// Worker's checks, what the hello carries), the values of a json Attribute
// indexed keywordArray, query literals, and searchFlows / searchAllFlows over
// the wire against the in-process gRPC server of fake-dex.ts: the request,
// the rows' values, paging, a refused query, a read repeated after UNAVAILABLE.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import {
  Attribute,
  AttributeMap,
  Client,
  DexError,
  Flow,
  FLOW_LIMITS,
  FlowSearchRow,
  INDEX_TYPES_BY_ATTRIBUTE_TYPE,
  Worker,
  gracefulComplete,
  runFlowTask,
  searchLiteral,
  searchQuery,
  type AttributeTypeName,
  type IndexTypeName,
  type Step,
} from "../src/index";
import { FakeDex } from "./fake-dex";
import { eventually, MemoryLogger } from "./helpers";
import { invalidArgument, wireTask } from "./task-fixture";

const ALL_INDEX_TYPES: IndexTypeName[] = ["keyword", "fullText", "keywordArray", "int", "double", "bool", "datetime"];
const ALL_TYPES: AttributeTypeName[] = ["string", "int64", "double", "bool", "datetime", "json", "bytes"];
const step: Step = { type: "A", execute: () => gracefulComplete() };

describe("index declarations", () => {
  test("each Attribute type takes exactly the index types the server's fits() allows", () => {
    assert.deepEqual(INDEX_TYPES_BY_ATTRIBUTE_TYPE, {
      string: ["keyword", "fullText", "keywordArray"],
      int64: ["int", "double"],
      double: ["double"],
      bool: ["bool"],
      datetime: ["datetime"],
      json: ["keywordArray"],
      bytes: [],
    });
    for (const type of ALL_TYPES) {
      for (const index of ALL_INDEX_TYPES) {
        const make = (): Attribute => new Attribute("a", type, { index });
        if (INDEX_TYPES_BY_ATTRIBUTE_TYPE[type].includes(index)) {
          assert.deepEqual(make().index, { type: index, key: "a" }, `${type} ${index}`);
        } else if (type === "bytes") {
          assert.throws(make, invalidArgument(/^INVALID_ARGUMENT: Attribute 'a': a bytes Attribute cannot be indexed$/));
        } else {
          assert.throws(
            make,
            invalidArgument(new RegExp(`^INVALID_ARGUMENT: Attribute 'a': a ${type} Attribute cannot have a ${index} index; it takes ${INDEX_TYPES_BY_ATTRIBUTE_TYPE[type].join(", ")}$`)),
          );
        }
      }
    }
  });

  test("the typed builders: index types as the Attribute type allows, a json keywordArray holds string[]", () => {
    const plan = Attribute.string("plan", { index: "keyword" });
    const note = Attribute.string("note", { index: "fullText", indexKey: "Note" });
    const amount = Attribute.int64("amount", { index: "int" });
    const score = Attribute.int64("score", { index: "double" });
    const ratio = Attribute.double("ratio", { index: "double" });
    const vip = Attribute.bool("vip", { index: "bool" });
    const due = Attribute.datetime("due", { index: "datetime" });
    const tags = Attribute.json("tags", { index: "keywordArray" });
    const cart = Attribute.json<{ items: string[] }>("cart");
    const plain = Attribute.string("plain");
    // The value types follow (checked by the compiler).
    const tagList: Attribute<string[]> = tags;
    const cartObject: Attribute<{ items: string[] }> = cart;
    assert.ok(tagList && cartObject);
    assert.deepEqual(
      [plan, note, amount, score, ratio, vip, due, tags].map((a) => [a.key, a.index?.type, a.index?.key]),
      [
        ["plan", "keyword", "plan"],
        ["note", "fullText", "Note"],
        ["amount", "int", "amount"],
        ["score", "double", "score"],
        ["ratio", "double", "ratio"],
        ["vip", "bool", "vip"],
        ["due", "datetime", "due"],
        ["tags", "keywordArray", "tags"],
      ],
    );
    assert.equal(plain.index, undefined);
    assert.equal(cart.index, undefined);
    if (false as boolean) {
      // @ts-expect-error a string Attribute takes no int index
      Attribute.string("x", { index: "int" });
      // @ts-expect-error an int64 Attribute takes no keyword index
      Attribute.int64("x", { index: "keyword" });
      // @ts-expect-error a json Attribute takes keywordArray only
      Attribute.json("x", { index: "keyword" });
      // @ts-expect-error a keywordArray json Attribute holds string[], not an object type
      Attribute.json<{ a: number }>("x", { index: "keywordArray" });
      // @ts-expect-error bytes cannot be indexed
      Attribute.bytes("x", { index: "keyword" });
      // @ts-expect-error AttributeMaps cannot be indexed
      AttributeMap.string("x", { index: "keyword" });
      // @ts-expect-error a keywordArray json Attribute takes no object
      tags.write({ a: 1 });
    }
  });

  test("bad indexes, index keys and AttributeMaps are refused when declared, naming the Attribute", () => {
    assert.throws(() => Attribute.string("s", { index: "toString" as never }), invalidArgument(/index must be one of .*, not toString/));
    assert.throws(() => Attribute.string("s", { index: "text" as never }), invalidArgument(/Attribute 's': index must be one of keyword, fullText, keywordArray, int, double, bool, datetime, not text/));
    assert.throws(() => Attribute.string("s", { indexKey: "S" } as never), invalidArgument(/Attribute 's': indexKey needs an index/));
    assert.throws(() => Attribute.string("s", "keyword" as never), invalidArgument(/Attribute 's': the options must be an object \(\{ index\?, indexKey\?, sync\? \}\), not a string/));
    assert.throws(() => Attribute.string("s", { index: "keyword", indexKey: "" }), invalidArgument(/Attribute 's': indexKey must be a non-empty string/));
    assert.throws(() => Attribute.string("s", { index: "keyword", indexKey: "a\tb" }), invalidArgument(/Attribute 's': indexKey 'a\tb' contains a control character/));
    assert.throws(() => Attribute.string("s", { index: "keyword", indexKey: "k".repeat(256) }), invalidArgument(/Attribute 's': indexKey 'k+\.\.\.' is longer than 255 bytes/));
    // System fields, in any case: the Attribute's key and a given index key.
    assert.throws(() => Attribute.string("status", { index: "keyword" }), invalidArgument(/Attribute 'status': the index key 'status' is the system field 'Status'; give the Attribute another indexKey/));
    assert.throws(() => Attribute.datetime("due", { index: "datetime", indexKey: "STARTTIME" }), invalidArgument(/Attribute 'due': the index key 'STARTTIME' is the system field 'StartTime'; choose another indexKey/));
    assert.equal(Attribute.string("status", { index: "keyword", indexKey: "OrderStatus" }).index?.key, "OrderStatus");
    assert.equal(Attribute.string("status").index, undefined, "an Attribute that is not indexed may have any key");
    for (const make of [
      () => AttributeMap.string("m", { index: "keyword" } as never),
      () => new AttributeMap("m", "int64", { index: "int" } as never),
      () => AttributeMap.json("m", { indexKey: "k" } as never),
    ]) {
      assert.throws(make, invalidArgument(/AttributeMap 'm' cannot be indexed: only a plain Attribute is searchable/));
    }
  });

  test("a Flow declares each index (index key empty: the Attribute's own); a key twice or too many indexes are refused", () => {
    const flow = new Flow({
      type: "Orders",
      startStep: step,
      steps: [step],
      attributes: [
        Attribute.string("plan", { index: "keyword" }),
        Attribute.string("plan2", { index: "keyword", indexKey: "plan2" }),
        Attribute.int64("total", { index: "double", indexKey: "Amount" }),
        Attribute.json("tags", { index: "keywordArray", indexKey: "Tags" }),
        Attribute.string("note"),
        AttributeMap.int64("seats"),
      ],
    });
    assert.deepEqual(flow.declaration().attributes, [
      { key: "plan", type: "ATTRIBUTE_STRING", isMap: false, index: { type: "INDEX_KEYWORD", indexKey: "" } },
      { key: "plan2", type: "ATTRIBUTE_STRING", isMap: false, index: { type: "INDEX_KEYWORD", indexKey: "" } },
      { key: "total", type: "ATTRIBUTE_INT64", isMap: false, index: { type: "INDEX_DOUBLE", indexKey: "Amount" } },
      { key: "tags", type: "ATTRIBUTE_JSON", isMap: false, index: { type: "INDEX_KEYWORD_ARRAY", indexKey: "Tags" } },
      { key: "note", type: "ATTRIBUTE_STRING", isMap: false },
      { key: "seats", type: "ATTRIBUTE_INT64", isMap: true },
    ]);
    assert.throws(
      () =>
        new Flow({
          type: "F",
          startStep: step,
          steps: [step],
          attributes: [Attribute.string("a", { index: "keyword", indexKey: "K" }), Attribute.int64("b", { index: "int", indexKey: "K" })],
        }),
      invalidArgument(/Flow 'F' declares the index key 'K' twice \(Attributes 'a' and 'b'\)/),
    );
    const many = Array.from({ length: FLOW_LIMITS.indexedAttributesPerFlow + 1 }, (_, i) => Attribute.int64(`n${i}`, { index: "int" }));
    assert.equal(FLOW_LIMITS.indexedAttributesPerFlow, 64);
    assert.equal(new Flow({ type: "F", startStep: step, steps: [step], attributes: many.slice(1) }).attributes.size, 64);
    assert.throws(
      () => new Flow({ type: "F", startStep: step, steps: [step], attributes: many }),
      invalidArgument(/Flow 'F' declares 65 indexed Attributes; the limit is 64/),
    );
  });

  test("a Worker refuses to declare two Flows that give one index key two index types", async () => {
    const a = new Flow({ type: "A", startStep: step, steps: [step], attributes: [Attribute.string("plan", { index: "keyword", indexKey: "Plan" })] });
    const b = new Flow({ type: "B", startStep: step, steps: [step], attributes: [Attribute.int64("plan", { index: "int", indexKey: "Plan" })] });
    const c = new Flow({ type: "C", startStep: step, steps: [step], attributes: [Attribute.string("p", { index: "keyword", indexKey: "Plan" })] });
    const worker = new Worker({ address: "127.0.0.1:1", logger: new MemoryLogger() }).host(a).host(b);
    await assert.rejects(worker.run(), invalidArgument(/index key 'Plan' is keyword in Flow type 'A'; Flow type 'B' declares it int/));
    await worker.shutdown();
    // The same type in two Flows is fine (index keys are shared by design).
    const fine = new Worker({ address: "127.0.0.1:1", logger: new MemoryLogger() }).host(a).host(c);
    const running = fine.run();
    await fine.shutdown();
    await running;
  });
});

describe("a json Attribute indexed keywordArray", () => {
  const tags = Attribute.json("tags", { index: "keywordArray" });
  const cart = Attribute.json<{ items: string[] }>("cart");

  test("takes an array of strings (and only that); an unindexed json Attribute takes any JSON value", () => {
    assert.deepEqual(tags.write(["gold", "eu"]), { key: "tags", instanceKey: "", type: "json", index: "keywordArray", value: ["gold", "eu"] });
    assert.deepEqual(tags.write([]).value, []);
    assert.deepEqual(tags.removal(), { key: "tags", instanceKey: "", type: "json", index: "keywordArray", value: undefined });
    assert.throws(() => tags.write({ a: 1 } as never), invalidArgument(/'tags' is a json Attribute indexed keywordArray; it takes an array of strings, not a Object/));
    assert.throws(() => tags.write(["a", 2] as never), invalidArgument(/it takes an array of strings, and element 1 is a number/));
    assert.throws(() => tags.write("gold" as never), invalidArgument(/it takes an array of strings, not a string/));
    assert.deepEqual(cart.write(["a"] as never).value, ["a"]);
    assert.throws(() => tags.write(null as never), invalidArgument(/it takes an array of strings, not null/));
    // Writes made before the index was known keep their old shape.
    assert.deepEqual(Attribute.string("plan").write("x"), { key: "plan", instanceKey: "", type: "string", value: "x" });
  });

  test("a Step reads and writes it as string[]", async () => {
    let seen: unknown;
    const s: Step = {
      type: "Tag",
      execute(ctx) {
        seen = tags.get(ctx);
        tags.set(ctx, [...(tags.get(ctx) ?? []), "new"]);
        return gracefulComplete();
      },
    };
    const flow = new Flow({ type: "T", startStep: s, steps: [s], attributes: [tags, cart] });
    const task = wireTask(
      { flowType: "T", stepType: "Tag", stepExecutionId: "Tag-1" },
      { attributes: [{ key: "tags", instanceKey: "", value: { jsonValue: '["a","b"]', value: "jsonValue" } }] },
    );
    const never = new AbortController().signal;
    const result = await runFlowTask(flow, task, never, () => false);
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    assert.deepEqual(seen, ["a", "b"]);
    assert.deepEqual(result.attributeWrites, [{ key: "tags", instanceKey: "", value: { jsonValue: '["a","b","new"]' } }]);

    const wrong: Step = {
      type: "Tag",
      execute(ctx) {
        tags.set(ctx, { no: "object" } as never);
        return gracefulComplete();
      },
    };
    const bad = await runFlowTask(new Flow({ type: "T", startStep: wrong, steps: [wrong], attributes: [tags] }), task, never, () => false);
    assert.match(bad.error?.message ?? "", /the Attribute 'tags' is a json Attribute indexed keywordArray; it takes an array of strings/);
  });
});

describe("query literals", () => {
  test("searchLiteral writes strings, numbers, booleans and Dates as the query language reads them", () => {
    assert.equal(searchLiteral("gold"), "'gold'");
    assert.equal(searchLiteral("it's a \\ path\n\tx"), "'it\\'s a \\\\ path\\n\\tx'");
    assert.equal(searchLiteral(42), "42");
    assert.equal(searchLiteral(-0.5), "-0.5");
    assert.equal(searchLiteral(2n ** 62n), "4611686018427387904");
    assert.equal(searchLiteral(true), "TRUE");
    assert.equal(searchLiteral(false), "FALSE");
    assert.equal(searchLiteral(new Date(1_700_000_000_000)), "'2023-11-14T22:13:20.000Z'");
    assert.equal(searchLiteral(new Date(Date.UTC(10000, 0, 1))), String(Date.UTC(10000, 0, 1)));
    assert.throws(() => searchLiteral(Number.NaN), invalidArgument(/no literal for the number NaN/));
    assert.throws(() => searchLiteral(new Date(Number.NaN)), invalidArgument(/an invalid Date/));
    assert.throws(() => searchLiteral(null as never), invalidArgument(/no literal for null/));
  });

  test("searchQuery puts values in as literals and lists", () => {
    const plan = "gold' OR Plan != '";
    assert.equal(
      searchQuery`Plan = ${plan} AND Tags IN (${["a", "b"]}) AND Amount >= ${10} ORDER BY Amount`,
      "Plan = 'gold\\' OR Plan != \\'' AND Tags IN ('a', 'b') AND Amount >= 10 ORDER BY Amount",
    );
    assert.throws(() => searchQuery`Tags IN (${[]})`, invalidArgument(/value 1 is an empty list/));
  });
});

describe("searchFlows over the wire", () => {
  let fake: FakeDex;
  let client: Client;
  const plan = Attribute.string("plan", { index: "keyword", indexKey: "Plan" });
  const tags = Attribute.json("tags", { index: "keywordArray", indexKey: "Tags" });
  const label = Attribute.string("label", { index: "keywordArray" });
  const amount = Attribute.int64("amount", { index: "double" });

  before(async () => {
    fake = new FakeDex();
    await fake.start();
    client = new Client({ addresses: [fake.address], timeoutMs: 5_000 });
  });
  after(() => {
    client?.close();
    fake?.stop();
  });

  const field = (key: string, type: string, value: Record<string, unknown>): Record<string, unknown> => ({ key, type, ...value });
  const row = (flowId: string, fields: Record<string, unknown>[] = []): Record<string, unknown> => ({
    flowId,
    runId: `${flowId}-run`,
    flowType: "Orders",
    status: "FLOW_COMPLETED",
    startUnixMs: 1_000,
    closeUnixMs: 2_000,
    parentFlowId: "",
    fields,
  });

  test("sends the query, page size, token and fields; answers typed rows", async () => {
    fake.answers.set("SearchFlows", () => ({
      rows: [
        row("o-1", [
          field("Plan", "INDEX_KEYWORD", { text: "gold" }),
          field("Tags", "INDEX_KEYWORD_ARRAY", { items: ["eu", "vip"] }),
          field("label", "INDEX_KEYWORD_ARRAY", { items: ["red"] }),
          field("amount", "INDEX_DOUBLE", { doubleValue: 12 }),
          field("Count", "INDEX_INT", { intValue: 7 }),
          field("Paid", "INDEX_BOOL", { boolValue: true }),
          field("Due", "INDEX_DATETIME", { timeMs: 1_700_000_000_000 }),
          field("Note", "INDEX_FULL_TEXT", { text: "Hello World", items: ["hello", "world"] }),
          field("__proto__", "INDEX_KEYWORD", { text: "odd" }),
        ]),
        { ...row("o-2"), status: "FLOW_RUNNING", closeUnixMs: 0, parentFlowId: "p-1" },
      ],
      nextPageToken: "tok-2",
      appliedSlot: 4711,
    }));
    const page = await client.searchFlows("Plan = 'gold'", { pageSize: 2, pageToken: "tok-1", fields: [tags, "CloseTime", plan, label] });
    assert.deepEqual(fake.lastCall("SearchFlows"), { query: "Plan = 'gold'", pageSize: 2, pageToken: "tok-1", fields: ["Tags", "CloseTime", "Plan", "label"] });
    assert.equal(page.nextPageToken, "tok-2");
    assert.equal(page.appliedSlot, 4711);
    assert.equal(page.rows.length, 2);
    const [first, second] = page.rows as [FlowSearchRow, FlowSearchRow];
    assert.ok(first instanceof FlowSearchRow);
    assert.deepEqual(
      [first.flowId, first.runId, first.flowType, first.status, first.startedAt, first.closedAt, first.parentFlowId],
      ["o-1", "o-1-run", "Orders", "COMPLETED", 1_000, 2_000, ""],
    );
    assert.deepEqual(first.fields, {
      Plan: "gold",
      Tags: ["eu", "vip"],
      label: ["red"],
      amount: 12,
      Count: 7,
      Paid: true,
      Due: new Date(1_700_000_000_000),
      Note: "Hello World",
      ["__proto__"]: "odd",
    });
    assert.equal(Object.getPrototypeOf(first.fields), Object.prototype);
    assert.equal(first.get(plan), "gold");
    assert.deepEqual(first.get(tags), ["eu", "vip"]);
    assert.equal(first.get(label), "red", "a string indexed keywordArray reads back as its string");
    assert.equal(first.get(amount), 12);
    assert.equal(first.get(Attribute.string("other", { index: "keyword" })), undefined);
    assert.throws(() => first.get(Attribute.string("plain")), invalidArgument(/the Attribute 'plain' is not indexed/));
    assert.throws(() => first.get(Attribute.int64("Plan", { index: "int" })), invalidArgument(/the row's field 'Plan' is keyword, but the Attribute 'Plan' is indexed int/));
    assert.deepEqual([second.status, second.closedAt, second.parentFlowId, second.fields], ["RUNNING", 0, "p-1", {}]);

    // Defaults: every run, the server's page size, the first page.
    fake.answers.set("SearchFlows", () => ({ rows: [] }));
    assert.deepEqual(await client.searchFlows(), { rows: [], nextPageToken: "", appliedSlot: 0 });
    assert.deepEqual(fake.lastCall("SearchFlows"), { query: "", pageSize: 0, pageToken: "", fields: [] });
  });

  test("an int beyond the safe integers fails the read instead of coming back rounded", async () => {
    fake.answers.set("SearchFlows", () => ({ rows: [row("o-1", [field("Big", "INDEX_INT", { intValue: 2 ** 60 })])] }));
    await assert.rejects(client.searchFlows("Big > 0"), invalidArgument(/the field 'Big' of run o-1-run of o-1 holds the int64 \d+, beyond what a JavaScript number keeps exactly/));
  });

  test("bad options are refused before anything is sent", async () => {
    const before = fake.calls.length;
    for (const [options, why] of [
      [{ pageSize: 1001 }, /searchFlows: pageSize must be an integer from 1 to 1000 \(0 or unset: 100\), not 1001/],
      [{ pageSize: -1 }, /pageSize must be an integer/],
      [{ pageSize: 2.5 }, /pageSize must be an integer/],
      [{ fields: [Attribute.string("plain")] }, /searchFlows: fields\[0\] is the Attribute 'plain', which is not indexed/],
      [{ fields: [AttributeMap.string("m")] }, /fields\[0\] must be an index key, a system field or an indexed Attribute/],
      [{ fields: [""] }, /fields\[0\] must be/],
      [{ fields: Array.from({ length: 101 }, (_, i) => `k${i}`) }, /101 fields; at most 100 may be asked for/],
      [{ pageToken: 5 }, /pageToken must be a string/],
    ] as const) {
      await assert.rejects(client.searchFlows("", options as never), invalidArgument(why));
    }
    await assert.rejects(client.searchFlows(5 as never), invalidArgument(/searchFlows: the query must be a string/));
    assert.equal(fake.calls.length, before, "nothing was sent");
  });

  test("the server's INVALID_ARGUMENT keeps its message; UNAVAILABLE is asked again (a read)", async () => {
    fake.answers.set("SearchFlows", () => ({ error: { code: grpc.status.INVALID_ARGUMENT, details: "query: at position 6: expected a literal, found the end of the query" } }));
    await assert.rejects(client.searchFlows("Plan ="), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "INVALID_ARGUMENT");
      assert.equal(e.details, "query: at position 6: expected a literal, found the end of the query");
      return true;
    });
    const from = fake.calls.length;
    let seen = 0;
    fake.answers.set("SearchFlows", () =>
      ++seen <= 2 ? { error: { code: grpc.status.UNAVAILABLE, details: "this process is a standby" } } : { rows: [row("o-9")], appliedSlot: 3 },
    );
    const page = await client.searchFlows("Plan = 'gold'");
    assert.deepEqual(page.rows.map((r) => r.flowId), ["o-9"]);
    assert.equal(fake.calls.slice(from).filter((c) => c.method === "SearchFlows").length, 3);
  });

  test("searchAllFlows follows the page tokens to the end, with the same query, page size and fields", async () => {
    const pages: Record<string, unknown> = {
      "": { rows: [row("a"), row("b")], nextPageToken: "t1" },
      t1: { rows: [row("c"), row("d")], nextPageToken: "t2" },
      t2: { rows: [row("e")], nextPageToken: "" },
    };
    fake.answers.set("SearchFlows", (r: { pageToken: string }) => pages[r.pageToken]);
    const from = fake.calls.length;
    const seen: string[] = [];
    for await (const r of client.searchAllFlows("FlowType = 'Orders'", { pageSize: 2, fields: [plan] })) seen.push(r.flowId);
    assert.deepEqual(seen, ["a", "b", "c", "d", "e"]);
    const requests = fake.calls.slice(from).map((c) => c.request);
    assert.deepEqual(
      requests.map((r) => [r.query, r.pageSize, r.pageToken, r.fields]),
      [
        ["FlowType = 'Orders'", 2, "", ["Plan"]],
        ["FlowType = 'Orders'", 2, "t1", ["Plan"]],
        ["FlowType = 'Orders'", 2, "t2", ["Plan"]],
      ],
    );
    // Stopping early asks for no more pages.
    const before = fake.calls.length;
    for await (const r of client.searchAllFlows("", { pageSize: 2 })) if (r.flowId === "a") break;
    assert.equal(fake.calls.length, before + 1);
    // A token that does not move on ends the iteration with an error instead of a loop.
    fake.answers.set("SearchFlows", () => ({ rows: [row("x")], nextPageToken: "same" }));
    const stuck = async (): Promise<void> => {
      for await (const _ of client.searchAllFlows("", { pageToken: "same" })) void _;
    };
    await assert.rejects(stuck(), /INTERNAL: searchAllFlows: the server answered the same page token again/);
  });

  test("a Worker's hello carries the indexes", async () => {
    const flow = new Flow({ type: "Orders", startStep: step, steps: [step], attributes: [plan, tags, Attribute.string("note")] });
    const worker = new Worker({ addresses: [fake.address], logger: new MemoryLogger() }).host(flow);
    const running = worker.run();
    await worker.ready();
    await eventually("the hello", () => fake.hellos.length > 0);
    const declared = fake.hellos.at(-1).flows[0].attributes;
    assert.deepEqual(
      declared.map((a: any) => [a.key, a.type, a.index?.type, a.index?.indexKey]),
      [
        ["plan", "ATTRIBUTE_STRING", "INDEX_KEYWORD", "Plan"],
        ["tags", "ATTRIBUTE_JSON", "INDEX_KEYWORD_ARRAY", "Tags"],
        ["note", "ATTRIBUTE_STRING", undefined, undefined],
      ],
    );
    await worker.shutdown();
    await running;
  });
});
