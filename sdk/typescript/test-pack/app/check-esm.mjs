// The installed package imported as an ES module: its named exports are there.
import assert from "node:assert/strict";

import { Channel, Client, Flow, FlowSearchRow, Worker, goTo, gracefulComplete, searchQuery } from "dex-sdk";

for (const [name, value] of Object.entries({ Channel, Client, Flow, FlowSearchRow, Worker, goTo, gracefulComplete, searchQuery })) {
  assert.equal(typeof value, "function", `dex-sdk has no ${name} for an ES module`);
}
console.log("check-esm.mjs: the named exports are there");
