// Completion in the Search view's query box (docs/dex-web.md, "Search"; docs/search.md,
// "Completing a query"), in a real browser against a real dex-server-zd dev and the example Flows'
// Worker (harness.mjs): a partial index key is offered and accepted from the keyboard, then the
// operators of its type, then the values of a KEYWORD key from ListSearchValues; Escape closes the
// list and Enter searches and finds the run. Also the pure completion function (completion.ts,
// compiled with web/'s TypeScript) on its own, and ListSearchKeys / ListSearchValues through the
// JSON gateway. The view is saved to screenshots/search-completion.png.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { accessibilityViolations, eventually, payload, repoRoot, screenshot, startStack, stopStack } from "./harness.mjs";

let dex;
let browser;
let context;
const suffix = `${Date.now().toString(36)}`;
const orderId = `completion-order-${suffix}`;
const customer = `globex-${suffix}`;

/** web/src/views/search/completion.ts as a module node can import (type-stripped by web/'s tsc). */
async function loadCompletion() {
  const ts = createRequire(path.join(repoRoot, "web/package.json"))("typescript");
  const source = readFileSync(path.join(repoRoot, "web/src/views/search/completion.ts"), "utf8");
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  const dir = mkdtempSync(path.join(tmpdir(), "dex-completion-"));
  const file = path.join(dir, "completion.mjs");
  writeFileSync(file, out);
  try {
    return await import(pathToFileURL(file).href);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

before(async () => {
  ({ dex, browser, context } = await startStack());
  // The Worker declares OrderProcessing (its index keys) when it connects.
  await eventually(
    async () => (await dex.call("ListSearchKeys", {})).keys.some((k) => k.name === "customer"),
    30_000,
    "the Worker's index keys",
  );
  await dex.call("StartFlow", {
    flowId: orderId,
    flowType: "OrderProcessing",
    input: payload({ order: orderId, amount: 7 }),
    options: {
      initialAttributes: [
        { key: "customer", value: { stringValue: customer } },
        { key: "tags", value: { jsonValue: JSON.stringify(["eu", `gift-${suffix}`]) } },
      ],
    },
  });
  // A second customer with the same start, for the list of values.
  await dex.call("StartFlow", {
    flowId: `${orderId}-eu`,
    flowType: "OrderProcessing",
    input: payload({ order: `${orderId}-eu`, amount: 8 }),
    options: { initialAttributes: [{ key: "customer", value: { stringValue: `${customer}-eu` } }] },
  });
});

after(async () => {
  await stopStack({ dex, browser });
});

test("the completion function: the token at the cursor and what may come there", async () => {
  const c = await loadCompletion();
  const fields = [
    ...c.systemFields,
    { name: "customer", type: "KEYWORD", system: false, sortable: true, flowTypes: ["OrderProcessing"] },
    { name: "total", type: "DOUBLE", system: false, sortable: true, flowTypes: ["OrderProcessing"] },
    { name: "vip", type: "BOOL", system: false, sortable: true, flowTypes: ["OrderProcessing"] },
    { name: "tags", type: "KEYWORD_ARRAY", system: false, sortable: false, flowTypes: ["OrderProcessing"] },
    { name: "order-status", type: "KEYWORD", system: false, sortable: true, flowTypes: ["OrderProcessing"] },
  ];
  const labels = (r) => r.suggestions.map((s) => s.label);
  const at = (text, cursor = text.length) => c.complete(text, cursor, fields, Date.UTC(2027, 0, 15));

  // A field: the typed prefix, any case, the typed case first.
  let r = at("cu");
  assert.equal(r.expect, "field");
  assert.deepEqual(labels(r), ["customer"]);
  assert.deepEqual([r.from, r.to], [0, 2]);
  assert.deepEqual(c.applySuggestion("cu", r, r.suggestions[0]), { text: "customer ", cursor: 9 });
  assert.ok(labels(at("")).includes("FlowType") && labels(at("")).includes("NOT"));
  assert.deepEqual(labels(at("s")), ["Status", "StartTime"]);
  // The middle of a word: the whole word is replaced.
  r = at("cuXX = 'a'", 2);
  assert.deepEqual([r.from, r.to], [0, 4]);
  // Operators by the field's type.
  assert.deepEqual(labels(at("customer ")), [
    "=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN", "BETWEEN", "NOT BETWEEN", "STARTS_WITH", "IS NULL", "IS NOT NULL",
  ]);
  assert.deepEqual(labels(at("vip ")), ["=", "!=", "IN", "NOT IN", "IS NULL", "IS NOT NULL"]);
  assert.deepEqual(labels(at("tags ")), ["=", "!=", "IN", "NOT IN", "STARTS_WITH", "IS NULL", "IS NOT NULL"]);
  assert.deepEqual(labels(at("total S")), []);
  assert.deepEqual(labels(at("customer s")), ["STARTS_WITH"]);
  // Values: statuses and booleans here, a KEYWORD's from the server by the typed prefix.
  assert.deepEqual(labels(at("Status = 'r")), ["RUNNING"]);
  assert.equal(at("Status = 'r").suggestions[0].insert, "'RUNNING'");
  assert.deepEqual(labels(at("vip = ")), ["true", "false"]);
  r = at("customer = 'ac");
  assert.equal(r.expect, "value");
  assert.deepEqual(r.fetchValues, { key: "customer", prefix: "ac" });
  assert.deepEqual(
    c.valueSuggestions(r, ["ac", "acme", "ac'x", "zed"]).map((s) => s.insert),
    ["'ac'", "'acme'", "'ac\\'x'"],
  );
  assert.deepEqual(at("FlowType IN ('Order', 'Sh").fetchValues, { key: "FlowType", prefix: "Sh" });
  assert.deepEqual(at("customer BETWEEN 'a' AND ").fetchValues, { key: "customer", prefix: "" });
  assert.deepEqual(at("tags STARTS_WITH 'g").fetchValues, { key: "tags", prefix: "g" });
  assert.equal(labels(at("StartTime >= "))[0], "2027-01-15T00:00:00.000Z");
  // Keywords after a predicate, in a list, after IS, after ORDER BY.
  assert.deepEqual(labels(at("customer = 'a' ")), ["AND", "OR", "ORDER BY"]);
  assert.deepEqual(labels(at("(customer = 'a' ")), ["AND", "OR", ")"]);
  assert.deepEqual(labels(at("customer = 'a' o")), ["OR", "ORDER BY"]);
  assert.deepEqual(labels(at("customer IN ('a' ")), [",", ")"]);
  assert.deepEqual(labels(at("customer IS ")), ["NULL", "NOT NULL"]);
  assert.deepEqual(labels(at("customer BETWEEN 'a' ")), ["AND"]);
  assert.ok(!labels(at("customer = 'a' ORDER BY ")).includes("tags"), "an array cannot follow ORDER BY");
  assert.deepEqual(labels(at("customer = 'a' ORDER BY total ")), ["ASC", "DESC"]);
  assert.deepEqual(labels(at("(NOT cu")), ["customer"]);
  // A name that is not a plain word is written in backticks; an operator ending in ( takes no space.
  assert.equal(c.fieldText("order-status"), "order-status");
  assert.equal(c.fieldText("my key"), "`my key`");
  assert.equal(c.fieldText("order"), "`order`");
  r = at("customer ");
  const inOp = r.suggestions.find((s) => s.label === "IN");
  assert.deepEqual(c.applySuggestion("customer ", r, inOp), { text: "customer IN (", cursor: 13 });
  // Nothing after a complete literal typed up to the cursor, or where the query is not the language.
  assert.equal(at("customer = 'a'").expect, "keyword");
  assert.equal(at("= = =").expect, "none");
});

test("ListSearchKeys and ListSearchValues through the JSON gateway", async () => {
  const keys = await dex.call("ListSearchKeys", {});
  const byName = Object.fromEntries(keys.keys.map((k) => [k.name, k]));
  assert.equal(byName.Status.system, true);
  assert.equal(byName.customer.type, "INDEX_KEYWORD");
  assert.deepEqual(byName.customer.flowTypes, ["OrderProcessing"]);
  assert.equal(byName.tags.type, "INDEX_KEYWORD_ARRAY");
  assert.equal(byName.tags.sortable, false);
  const values = await dex.call("ListSearchValues", { key: "customer", prefix: "globex-" });
  assert.deepEqual(values.values, [customer, `${customer}-eu`]);
  const one = await dex.call("ListSearchValues", { key: "customer", prefix: "globex-", limit: 1 });
  assert.deepEqual([one.values, one.truncated], [[customer], true]);
  assert.deepEqual((await dex.call("ListSearchValues", { key: "tags", prefix: "gift-" })).values, [`gift-${suffix}`]);
  assert.ok((await dex.call("ListSearchValues", { key: "FlowType", prefix: "" })).values.includes("OrderProcessing"));
  await assert.rejects(dex.call("ListSearchValues", { key: "total", prefix: "" }), (e) => {
    assert.equal(e.status, 400);
    assert.match(e.body, /'total' is DOUBLE/);
    return true;
  });
  await assert.rejects(dex.call("ListSearchValues", { key: "nope", prefix: "" }), /'nope': not a system field/);
  await assert.rejects(dex.call("ListSearchValues", { key: "customer", prefix: "x".repeat(1025) }), /prefix/);
});

test("the query box completes an index key, its operators and a KEYWORD value from the keyboard", async (t) => {
  const page = await context.newPage();
  await page.goto(`${dex.webUrl}/`);
  const query = page.getByRole("combobox", { name: "Query" });
  await query.waitFor({ timeout: 15_000 });
  await query.click();
  const list = page.getByRole("listbox", { name: "Suggestions", exact: true });
  const option = (name) => list.getByRole("option", { name });
  const shown = async () => list.getByRole("option").evaluateAll((os) => os.map((o) => o.textContent));

  // A partial index key: offered, with its type and Flow type; ArrowDown picks it, Enter accepts.
  await page.keyboard.type("cust");
  await option(/^customer/).waitFor({ timeout: 10_000 });
  assert.equal(await query.getAttribute("aria-expanded"), "true");
  assert.match((await shown()).join("|"), /customerKEYWORD · OrderProcessing/);
  await page.keyboard.press("ArrowDown");
  await page.keyboard.press("Enter");
  assert.equal(await query.inputValue(), "customer ");

  // The operators of a KEYWORD key.
  await option("STARTS_WITH").waitFor();
  const ops = await shown();
  for (const op of ["=", "!=", "<", ">=", "IN", "BETWEEN", "STARTS_WITH", "IS NULL"]) assert.ok(ops.includes(op), ops.join(" "));
  await page.keyboard.press("ArrowDown"); // "=" is first
  await page.keyboard.press("Enter");
  assert.equal(await query.inputValue(), "customer = ");

  // The key's values that start with what is typed, from the server.
  await page.keyboard.type("'glob");
  await option(new RegExp(`^${customer}-eu`)).waitFor({ timeout: 10_000 });
  assert.deepEqual(await shown(), [`${customer}KEYWORD`, `${customer}-euKEYWORD`]);
  await page.keyboard.press("ArrowDown");
  assert.equal(await query.getAttribute("aria-activedescendant"), await list.getByRole("option").first().getAttribute("id"));
  await screenshot(page, "search-completion");
  assert.deepEqual(await accessibilityViolations(page), [], "accessibility of the open suggestions");
  await page.keyboard.press("Enter");
  assert.equal(await query.inputValue(), `customer = '${customer}' `);

  // Then the connectives; Escape closes the list, and Enter searches.
  await option("AND").waitFor();
  await page.keyboard.press("Escape");
  assert.equal(await query.getAttribute("aria-expanded"), "false");
  const t0 = Date.now();
  await page.keyboard.press("Enter");
  const text = `customer = '${customer}'`;
  await page.locator(`[data-testid="results"][data-query="${text}"]`).waitFor({ timeout: 15_000 });
  t.diagnostic(`completed query: ${Date.now() - t0} ms from Enter to the row`);
  assert.equal(await page.getByTestId("result-row").count(), 1);
  assert.match(await page.getByTestId("result-row").innerText(), new RegExp(orderId));
  await page.close();
});

test("Enter searches while suggestions are shown but none is picked", async () => {
  const page = await context.newPage();
  await page.goto(`${dex.webUrl}/`);
  const query = page.getByRole("combobox", { name: "Query" });
  await query.waitFor({ timeout: 15_000 });
  await query.click();
  await page.keyboard.type(`tags = 'gift-${suffix}' `);
  await page.getByRole("listbox", { name: "Suggestions", exact: true }).getByRole("option", { name: "AND" }).waitFor();
  await page.keyboard.press("Enter");
  const text = `tags = 'gift-${suffix}'`;
  await page.locator(`[data-testid="results"][data-query="${text}"]`).waitFor({ timeout: 15_000 });
  assert.match(await page.getByTestId("result-row").innerText(), new RegExp(orderId));
  assert.equal(await query.getAttribute("aria-expanded"), "false");
  await page.close();
});
