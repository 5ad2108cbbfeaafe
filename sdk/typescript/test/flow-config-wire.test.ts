// Client.updateFlowConfig and FlowState.config over the wire, against the
// in-process gRPC server of fake-dex.ts: the request's fields (a set field,
// cleared fields in the proto's names, a request ID), the answer's effective
// config, the FLOW_CONFIG_UPDATED event, a repeat after UNAVAILABLE with the
// same request ID, and bad input refused before anything is sent.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { Client, DexError } from "../src/index";
import { FakeDex } from "./fake-dex";

const HEX_ID = /^[0-9a-f]{32}$/;

describe("Client.updateFlowConfig over the wire", () => {
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

  test("set fields and cleared fields go on the wire, and the run's effective config comes back", async () => {
    fake.answers.set("UpdateFlowConfig", () => ({
      config: { continueAsNewAfterEvents: 500, defaultDurability: "ASYNC", attributeStore: "crm", indexActiveStepTypes: false },
      alreadyDone: false,
      continuedRunId: "",
    }));
    const result = await client.updateFlowConfig(
      "f-1",
      "r-1",
      { continueAsNewAfterEvents: 500, defaultDurability: "async", indexActiveStepTypes: false },
      { clear: ["continueAsNewAfterBytes"] },
    );
    assert.deepEqual(result, {
      config: { continueAsNewAfterEvents: 500, continueAsNewAfterBytes: 0, defaultDurability: "async", attributeStore: "crm", indexActiveStepTypes: false },
      alreadyDone: false,
      continuedRunId: "",
    });
    const request = fake.lastCall("UpdateFlowConfig");
    assert.deepEqual(request.flow, { flowId: "f-1", runId: "r-1" });
    assert.equal(request.config.continueAsNewAfterEvents, 500);
    assert.equal(request.config.defaultDurability, "ASYNC");
    assert.equal(request.config.indexActiveStepTypes, false);
    assert.deepEqual(request.clearFields, ["continue_as_new_after_bytes"]);
    assert.match(request.requestId, HEX_ID);
  });

  test("getFlowState shows the config and history events the FLOW_CONFIG_UPDATED configs", async () => {
    fake.answers.set("GetFlowState", () => ({
      flow: { flowId: "f-1", runId: "r-1", flowType: "Shop", status: "FLOW_RUNNING", outputs: [] },
      active: [],
      workers: [],
      config: { continueAsNewAfterBytes: 65_536, defaultDurability: "SYNC", attributeStore: "", indexActiveStepTypes: true },
    }));
    const state = await client.getFlowState("f-1");
    assert.deepEqual(state.config, {
      continueAsNewAfterEvents: 0,
      continueAsNewAfterBytes: 65_536,
      defaultDurability: "sync",
      attributeStore: "",
      indexActiveStepTypes: true,
    });
    fake.answers.set("GetHistoryEvents", () => ({
      runId: "r-1",
      more: false,
      events: [
        {
          seq: 3,
          kind: "FLOW_CONFIG_UPDATED",
          atMs: 1,
          // A stored config leaves unset fields out: they read as their defaults.
          oldConfig: { attributeStore: "crm" },
          newConfig: { attributeStore: "crm", defaultDurability: "ASYNC", indexActiveStepTypes: false },
        },
      ],
    }));
    const page = await client.getHistoryEvents("f-1");
    const [e] = page.events;
    assert.equal(e.kind, "FLOW_CONFIG_UPDATED");
    assert.deepEqual([e.oldConfig?.defaultDurability, e.oldConfig?.indexActiveStepTypes], ["sync", true]);
    assert.deepEqual([e.newConfig?.defaultDurability, e.newConfig?.indexActiveStepTypes, e.newConfig?.attributeStore], ["async", false, "crm"]);
  });

  test("a repeat after UNAVAILABLE carries the same request ID; the server's refusals keep their codes", async () => {
    const from = fake.calls.length;
    let seen = 0;
    fake.answers.set("UpdateFlowConfig", () =>
      ++seen === 1
        ? { error: { code: grpc.status.UNAVAILABLE, details: "the process lost its lease; the write's outcome is unknown" } }
        : { config: { defaultDurability: "ASYNC", indexActiveStepTypes: true }, alreadyDone: true, continuedRunId: "" },
    );
    const result = await client.updateFlowConfig("f-1", "r-1", { defaultDurability: "async" });
    assert.equal(result.alreadyDone, true);
    const tries = fake.calls.slice(from).filter((c) => c.method === "UpdateFlowConfig").map((c) => c.request);
    assert.equal(tries.length, 2);
    assert.deepEqual(tries[1], tries[0], "the repeat is the same request");

    fake.answers.set("UpdateFlowConfig", () => ({
      error: { code: grpc.status.FAILED_PRECONDITION, details: "the Attribute Store of a running run cannot change (from none to 'crm')" },
    }));
    await assert.rejects(client.updateFlowConfig("f-1", "r-1", { attributeStore: "crm" }), (e: unknown) => {
      assert.ok(e instanceof DexError);
      assert.equal(e.code, "FAILED_PRECONDITION");
      assert.match(e.message, /cannot change/);
      return true;
    });
  });

  test("bad input is refused with INVALID_ARGUMENT naming the field, before anything is sent", async () => {
    const from = fake.calls.length;
    const bad: [Promise<unknown>, RegExp][] = [
      [client.updateFlowConfig("f-1", "", { defaultDurability: "async" }), /the run ID must be a non-empty string/],
      [client.updateFlowConfig("f-1", "r-1", {}), /sets no field and clear names none/],
      [client.updateFlowConfig("f-1", "r-1", { continueAsNewAfterEvents: 0 }), /continueAsNewAfterEvents must be a whole number above 0/],
      [client.updateFlowConfig("f-1", "r-1", { defaultDurability: "later" as "sync" }), /defaultDurability must be one of sync, async/],
      [client.updateFlowConfig("f-1", "r-1", {}, { clear: ["retries" as "attributeStore"] }), /clear\[0\] 'retries' is not a FlowConfig field/],
    ];
    for (const [call, message] of bad) {
      await assert.rejects(call, (e: unknown) => {
        assert.ok(e instanceof DexError);
        assert.equal(e.code, "INVALID_ARGUMENT");
        assert.match(e.message, message);
        return true;
      });
    }
    assert.equal(fake.calls.length, from, "nothing was sent");
  });
});
