// Finding Flows against a real dex-server-zd dev: a Flow type declares
// indexed Attributes of every index type, seven runs start with initial
// values, a Client and a Step write more, and searchFlows finds them: each
// index type's operators, the default and an explicit order, the fields a
// row carries, every page through searchAllFlows (page size 2), a json
// Attribute indexed keywordArray, queries the server refuses naming the
// position, and declarations the server refuses (an index key that another
// Flow type's live declaration gives another type; a value of the wrong shape).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Attribute,
  Client,
  DexError,
  Flow,
  Timer,
  Wait,
  Worker,
  deadEnd,
  goTo,
  searchQuery,
  type FlowSearchRow,
  type Step,
} from "../src/index";
import { DevServer, MemoryLogger } from "./helpers";

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const plan = Attribute.string("plan", { index: "keyword", indexKey: "Plan" });
const note = Attribute.string("note", { index: "fullText", indexKey: "Note" });
const tags = Attribute.json("tags", { index: "keywordArray", indexKey: "Tags" });
const region = Attribute.string("region", { index: "keywordArray", indexKey: "Region" });
const amount = Attribute.int64("amount", { index: "int", indexKey: "Amount" });
const score = Attribute.double("score", { index: "double", indexKey: "Score" });
const vip = Attribute.bool("vip", { index: "bool", indexKey: "Vip" });
const due = Attribute.datetime("due", { index: "datetime", indexKey: "Due" });
const secret = Attribute.string("secret");

const ORDERS_TYPE = "ts-search-orders";
const REFUNDS_TYPE = "ts-search-refunds";

// Keeps a run open until it is stopped.
const idle: Step = { type: "Idle", waitFor: () => Wait.anyOf(Timer.after(600_000)), execute: () => deadEnd() };
// The first Step tags the run as started (a Worker's write of the keywordArray json Attribute).
const begin: Step = {
  type: "Begin",
  attributeReads: [tags],
  execute(ctx) {
    tags.set(ctx, [...(tags.get(ctx) ?? []), "started"]);
    return goTo(idle);
  },
};
const ORDERS = new Flow({
  type: ORDERS_TYPE,
  startStep: begin,
  steps: [begin, idle],
  attributes: [plan, note, tags, region, amount, score, vip, due, secret],
});
// Another Flow type shares the index key "Plan" (the same type: allowed).
const refundPlan = Attribute.string("refundPlan", { index: "keyword", indexKey: "Plan" });
const REFUNDS = new Flow({ type: REFUNDS_TYPE, startStep: idle, steps: [idle], attributes: [refundPlan] });

interface Order {
  id: string;
  plan: string;
  note: string;
  tags: string[];
  region: string;
  amount: number;
  score: number;
  vip: boolean;
  due: Date;
}
const DAY = 86_400_000;
const BASE = Date.UTC(2030, 0, 1);
const ORDER_LIST: Order[] = [
  { id: "o-1", plan: "gold", note: "Rush delivery, fragile", tags: ["vip", "eu"], region: "eu-west", amount: 50, score: 1.5, vip: true, due: new Date(BASE) },
  { id: "o-2", plan: "silver", note: "Leave at the door", tags: ["us"], region: "us-east", amount: 20, score: 0.5, vip: false, due: new Date(BASE + DAY) },
  { id: "o-3", plan: "gold", note: "Gift wrap please", tags: ["eu"], region: "eu-north", amount: 70, score: 2.25, vip: false, due: new Date(BASE + 2 * DAY) },
  { id: "o-4", plan: "bronze", note: "rush order", tags: [], region: "ap-south", amount: 5, score: 0.1, vip: false, due: new Date(BASE + 3 * DAY) },
  { id: "o-5", plan: "gold", note: "Call before delivery", tags: ["vip", "us"], region: "us-west", amount: 30, score: 3, vip: true, due: new Date(BASE + 4 * DAY) },
  { id: "o-6", plan: "silver", note: "Fragile glass", tags: ["eu", "fragile"], region: "eu-west", amount: 90, score: 1, vip: false, due: new Date(BASE + 5 * DAY) },
  { id: "o-7", plan: "platinum", note: "Rush", tags: ["vip"], region: "us-east", amount: 10, score: 2, vip: true, due: new Date(BASE + 6 * DAY) },
];
// The ones started last first: the default order is StartTime DESC.
const NEWEST_FIRST = ORDER_LIST.map((o) => o.id).reverse();
const ids = (rows: FlowSearchRow[]): string[] => rows.map((r) => r.flowId);
const newestFirst = (pick: (o: Order) => boolean): string[] => NEWEST_FIRST.filter((id) => pick(ORDER_LIST.find((o) => o.id === id) as Order));

describe("Finding Flows on a dex server", () => {
  let server: DevServer;
  let client: Client;
  let worker: Worker;
  const ofOrders = `FlowType = '${ORDERS_TYPE}'`;

  before(async () => {
    server = await DevServer.start();
    client = new Client({ addresses: [server.address], timeoutMs: 10_000 });
    worker = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(ORDERS).host(REFUNDS);
    void worker.run();
    await worker.ready();
    for (const o of ORDER_LIST) {
      await client.startFlow(ORDERS, o.id, null, {
        initialAttributes: [
          plan.write(o.plan),
          note.write(o.note),
          tags.write(o.tags),
          region.write(o.region),
          amount.write(o.amount),
          score.write(o.score),
          vip.write(o.vip),
          due.write(o.due),
          secret.write("not searchable"),
        ],
      });
      await sleep(5); // distinct start times
    }
    await client.startFlow(REFUNDS, "r-1", null, { initialAttributes: [refundPlan.write("gold")] });
    for (const o of ORDER_LIST) {
      const begun = await client.waitForStepCompletion(o.id, "Begin-1", { timeoutMs: 15_000 });
      assert.equal(begun.completed, true, `${o.id}: ${JSON.stringify(begun)}`);
    }
  });

  after(async () => {
    client?.close();
    await worker?.shutdown();
    await server?.stop();
  });

  test("keyword: the runs of one value, newest first, with the fields named or asked for", async () => {
    const page = await client.searchFlows("Plan = 'gold'", { fields: [amount, "StartTime"] });
    // The refund shares the index key: it is found too, in start order.
    assert.deepEqual(ids(page.rows), ["r-1", "o-5", "o-3", "o-1"]);
    assert.equal(page.nextPageToken, "");
    assert.ok(page.appliedSlot > 0, String(page.appliedSlot));
    const o5 = page.rows[1] as FlowSearchRow;
    assert.deepEqual([o5.flowType, o5.status, o5.closedAt, o5.parentFlowId], [ORDERS_TYPE, "RUNNING", 0, ""]);
    assert.ok(o5.startedAt > 0 && o5.startedAt <= Date.now());
    assert.deepEqual(Object.keys(o5.fields).sort(), ["Amount", "Plan", "StartTime"]);
    assert.equal(o5.get(plan), "gold");
    assert.equal(o5.get(amount), 30);
    assert.deepEqual(o5.fields["StartTime"], new Date(o5.startedAt));
    assert.equal(o5.get(tags), undefined, "not named, not asked for");
    const refund = page.rows[0] as FlowSearchRow;
    assert.deepEqual([refund.flowType, refund.get(refundPlan), refund.fields["Amount"]], [REFUNDS_TYPE, "gold", undefined]);

    const starts = page.rows.map((r) => r.startedAt);
    assert.deepEqual(starts, [...starts].sort((a, b) => b - a), "StartTime DESC");
    assert.deepEqual(ids((await client.searchFlows(`Plan STARTS_WITH 'si' AND ${ofOrders}`)).rows), ["o-6", "o-2"]);
    assert.deepEqual(ids((await client.searchFlows(`Plan IN ('bronze', 'platinum')`)).rows), ["o-7", "o-4"]);
  });

  test("ORDER BY an indexed Attribute, ascending and descending; every index type's comparisons", async () => {
    const byAmount = await client.searchFlows(`${ofOrders} ORDER BY Amount`);
    assert.deepEqual(ids(byAmount.rows), ["o-4", "o-7", "o-2", "o-5", "o-1", "o-3", "o-6"]);
    assert.deepEqual(byAmount.rows.map((r) => r.get(amount)), [5, 10, 20, 30, 50, 70, 90]);
    const byScore = await client.searchFlows(`Score >= 1.5 ORDER BY Score DESC`);
    assert.deepEqual(byScore.rows.map((r) => [r.flowId, r.get(score)]), [["o-5", 3], ["o-3", 2.25], ["o-7", 2], ["o-1", 1.5]]);

    const cases: [string, string[]][] = [
      ["Amount BETWEEN 20 AND 70", newestFirst((o) => o.amount >= 20 && o.amount <= 70)],
      ["Amount > 50 OR Vip = TRUE", newestFirst((o) => o.amount > 50 || o.vip)],
      ["Vip = FALSE AND NOT Plan = 'silver'", newestFirst((o) => !o.vip && o.plan !== "silver")],
      ["Note = 'rush'", newestFirst((o) => /rush/i.test(o.note))],
      ["Note = 'FRAGILE delivery'", ["o-1"]],
      ["Note STARTS_WITH 'deliv'", newestFirst((o) => /deliver/i.test(o.note))],
      ["Region = 'eu-west'", ["o-6", "o-1"]],
      ["Region STARTS_WITH 'us-'", newestFirst((o) => o.region.startsWith("us-"))],
      [searchQuery`Due >= ${new Date(BASE + 2 * DAY)} AND Due < ${new Date(BASE + 5 * DAY)}`, ["o-5", "o-4", "o-3"]],
      [`Due < ${BASE + DAY}`, ["o-1"]],
      ["ActiveStepTypes = 'Idle' AND Plan = 'platinum'", ["o-7"]],
    ];
    for (const [query, expected] of cases) {
      assert.deepEqual(ids((await client.searchFlows(query)).rows), expected, query);
    }
    const row = (await client.searchFlows("Due < '2030-01-02T00:00:00Z'", { fields: [due, vip, score, note, region] })).rows[0] as FlowSearchRow;
    assert.deepEqual(
      [row.get(due)?.getTime(), row.get(vip), row.get(score), row.get(note), row.get(region)],
      [BASE, true, 1.5, "Rush delivery, fragile", "eu-west"],
    );
  });

  test("a json Attribute indexed keywordArray: membership, its values as string[], Client and Step writes", async () => {
    // Begin added "started" to every run's tags.
    const vips = await client.searchFlows("Tags = 'vip'", { fields: [tags] });
    assert.deepEqual(ids(vips.rows), ["o-7", "o-5", "o-1"]);
    assert.deepEqual(vips.rows.map((r) => r.get(tags)), [["vip", "started"], ["vip", "us", "started"], ["vip", "eu", "started"]]);
    assert.deepEqual(ids((await client.searchFlows("Tags = 'started'")).rows), NEWEST_FIRST);
    assert.deepEqual(ids((await client.searchFlows("Tags IN ('us', 'fragile')")).rows), ["o-6", "o-5", "o-2"]);
    assert.deepEqual(ids((await client.searchFlows("Tags STARTS_WITH 'fra'")).rows), ["o-6"]);
    assert.deepEqual((await client.getAttributes("o-4")).get(tags), ["started"]);

    // A Client's write is found at once (the answer's slot holds it).
    const before = (await client.searchFlows("Tags = 'audited'")).appliedSlot;
    await client.setAttributes("o-4", [tags.write(["started", "audited"]), plan.write("gold")]);
    const now = await client.searchFlows("Tags = 'audited' AND Plan = 'gold'", { fields: [tags] });
    assert.deepEqual(ids(now.rows), ["o-4"]);
    assert.deepEqual(now.rows[0]?.get(tags), ["started", "audited"]);
    assert.ok(now.appliedSlot > before, `${now.appliedSlot} > ${before}`);
    // A removal takes the run out of the field's index.
    await client.setAttributes("o-4", [tags.removal(), plan.write("bronze")]);
    assert.deepEqual(ids((await client.searchFlows("Tags = 'audited'")).rows), []);
    assert.deepEqual(ids((await client.searchFlows(`Tags IS NULL AND ${ofOrders}`)).rows), ["o-4"]);

    // The server's own rule: a json Attribute indexed keywordArray holds an array of strings. A
    // write the SDK would refuse, forced past it, is refused by the server naming the Attribute.
    const forced = { key: "tags", instanceKey: "", type: "json" as const, value: { not: "an array" } };
    await assert.rejects(client.setAttributes("o-4", [forced]), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "INVALID_ARGUMENT", e.message);
      assert.match(e.message, /tags.*indexed KEYWORD_ARRAY, is not a JSON array/);
      return true;
    });
  });

  test("searchAllFlows pages through every run, two rows a page, newest first", async () => {
    const seen: string[] = [];
    for await (const row of client.searchAllFlows(ofOrders, { pageSize: 2 })) seen.push(row.flowId);
    assert.deepEqual(seen, NEWEST_FIRST);

    // The same pages by hand: four, the last without a token.
    const pages: string[][] = [];
    let pageToken = "";
    for (;;) {
      const page = await client.searchFlows(ofOrders, { pageSize: 2, pageToken });
      pages.push(ids(page.rows));
      if (page.nextPageToken === "") break;
      pageToken = page.nextPageToken;
    }
    assert.deepEqual(pages, [["o-7", "o-6"], ["o-5", "o-4"], ["o-3", "o-2"], ["o-1"]]);

    // Ordered by an Attribute, across pages, and resumed from a page's token.
    const byAmount: number[] = [];
    for await (const row of client.searchAllFlows(`${ofOrders} ORDER BY Amount DESC`, { pageSize: 2 })) byAmount.push(row.get(amount) ?? -1);
    assert.deepEqual(byAmount, [90, 70, 50, 30, 20, 10, 5]);
    const first = await client.searchFlows(ofOrders, { pageSize: 3 });
    const rest: string[] = [];
    for await (const row of client.searchAllFlows(ofOrders, { pageSize: 2, pageToken: first.nextPageToken })) rest.push(row.flowId);
    assert.deepEqual([...ids(first.rows), ...rest], NEWEST_FIRST);
  });

  test("closed runs: Status and CloseTime", async () => {
    await client.stopFlow("o-2");
    await client.stopFlow("o-6", { mode: "terminate" });
    const closed = await client.searchFlows(`${ofOrders} AND Status != 'RUNNING' ORDER BY CloseTime`, { fields: ["CloseTime", "ExecutionDuration"] });
    assert.deepEqual(closed.rows.map((r) => [r.flowId, r.status]), [["o-2", "CANCELED"], ["o-6", "TERMINATED"]]);
    for (const r of closed.rows) {
      assert.ok(r.closedAt >= r.startedAt && r.closedAt > 0, JSON.stringify(r));
      assert.deepEqual(r.fields["CloseTime"], new Date(r.closedAt));
      assert.equal(r.fields["ExecutionDuration"], r.closedAt - r.startedAt);
    }
    assert.deepEqual(ids((await client.searchFlows("Status = 'canceled'")).rows), ["o-2"]);
    assert.deepEqual(ids((await client.searchFlows(`${ofOrders} AND Status = 'RUNNING'`)).rows), ["o-7", "o-5", "o-4", "o-3", "o-1"]);
  });

  test("completing a query: the keys in use with their types and Flow types, a keyword's values by prefix", async () => {
    const keys = await client.listSearchKeys();
    const byName = new Map(keys.keys.map((k) => [k.name, k]));
    assert.deepEqual(byName.get("Status"), { name: "Status", type: "keyword", system: true, sortable: true, flowTypes: [] });
    assert.deepEqual(byName.get("Plan"), { name: "Plan", type: "keyword", system: false, sortable: true, flowTypes: [ORDERS_TYPE, REFUNDS_TYPE].sort() });
    assert.equal(byName.get("Tags")?.type, "keywordArray");
    assert.equal(byName.get("Tags")?.sortable, false);
    assert.equal(byName.get("Note")?.type, "fullText");
    assert.equal(byName.has("secret"), false);
    assert.equal(keys.truncated, false);
    assert.ok(keys.appliedSlot > 0);

    assert.deepEqual((await client.listSearchValues("Plan")).values, ["bronze", "gold", "platinum", "silver"]);
    const g = await client.listSearchValues("Plan", { prefix: "g" });
    assert.deepEqual([g.values, g.truncated], [["gold"], false]);
    const two = await client.listSearchValues("Region", { prefix: "eu-", limit: 1 });
    assert.deepEqual([two.values, two.truncated], [["eu-north"], true]);
    assert.deepEqual((await client.listSearchValues("FlowType", { prefix: "ts-search-" })).values, [ORDERS_TYPE, REFUNDS_TYPE].sort());
    await assert.rejects(client.listSearchValues("Amount"), (e: unknown) => {
      assert.ok(e instanceof DexError && e.code === "INVALID_ARGUMENT", String(e));
      assert.match(e.message, /key 'Amount' is INT/);
      return true;
    });
    await assert.rejects(client.listSearchValues("Plan", { limit: 101 }), /limit must be an integer from 0/);
    await assert.rejects(client.listSearchValues(""), /the key must be a non-empty string/);
  });

  test("a query the server refuses: INVALID_ARGUMENT naming the position", async () => {
    const refused = async (query: string, pattern: RegExp, options = {}): Promise<void> => {
      await assert.rejects(client.searchFlows(query, options), (e: unknown) => {
        assert.ok(e instanceof DexError, String(e));
        assert.equal(e.code, "INVALID_ARGUMENT", e.message);
        assert.match(e.message, pattern);
        return true;
      });
    };
    await refused("Plan =", /^INVALID_ARGUMENT: query: at position 7: expected .*, found the end of the query/);
    await refused("Plan = 'gold' AND Amount = 'many'", /^INVALID_ARGUMENT: query: at position 28: INT field 'Amount' cannot be compared with a string/);
    await refused("secret = 'x'", /^INVALID_ARGUMENT: query: at position 1: unknown field 'secret' \(system fields: FlowId, .*; index keys in use: .*Plan/);
    await refused("Vip > TRUE", /^INVALID_ARGUMENT: query: at position 1: BOOL field 'Vip' has no order/);
    await refused(`${ofOrders} ORDER BY Tags`, /query: at position \d+: cannot ORDER BY KEYWORD_ARRAY field 'Tags'/);
    await refused("", /fields: Nope is neither a system field nor an index key in use/, { fields: ["Nope"] });
    // A page token belongs to its query.
    const first = await client.searchFlows(ofOrders, { pageSize: 1 });
    await refused("Plan = 'gold'", /page_token/, { pageToken: first.nextPageToken });
  });

  test("a declaration that gives an index key another type than another Flow type's live one is refused naming both", async () => {
    const wrong = new Flow({
      type: "ts-search-conflict",
      startStep: idle,
      steps: [idle],
      attributes: [Attribute.string("total", { index: "keyword", indexKey: "Amount" })],
    });
    const other = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(wrong);
    await assert.rejects(other.run(), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "INVALID_ARGUMENT");
      assert.match(e.message, /refused this Worker: index key 'Amount' is INT in Flow type 'ts-search-orders'; Flow type 'ts-search-conflict' declares it KEYWORD/);
      return true;
    });
    await other.shutdown();
    // The same index type under another Flow type is fine; the running Worker and the index are untouched.
    const agrees = new Flow({
      type: "ts-search-agrees",
      startStep: idle,
      steps: [idle],
      attributes: [Attribute.int64("total", { index: "int", indexKey: "Amount" })],
    });
    const third = new Worker({ addresses: [server.address], logger: new MemoryLogger() }).host(agrees);
    void third.run();
    await third.ready();
    await client.startFlow(agrees, "a-1", null, { initialAttributes: [Attribute.int64("total", { index: "int", indexKey: "Amount" }).write(1_000)] });
    assert.deepEqual(ids((await client.searchFlows("Amount >= 90 ORDER BY Amount DESC")).rows), ["a-1", "o-6"]);
    await third.shutdown();
  });
});
