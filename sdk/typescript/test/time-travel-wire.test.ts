// Client.timeTravel over the wire, against the in-process gRPC server of
// fake-dex.ts: each point's request fields, a dry run's answer converted as
// getFlowState and getAttributes convert theirs, a repeat after UNAVAILABLE
// with the request ID unchanged, the server's codes kept, bad input refused
// before anything is sent, and the time travel links of descriptions and
// history events.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { Attribute, Client, DexError, gracefulComplete, type Step, type TimeTravelPoint } from "../src/index";
import { FakeDex } from "./fake-dex";

const stage = Attribute.string("stage");
const charge: Step = { type: "Charge", execute: () => gracefulComplete("charged") };
const HEX_ID = /^[0-9a-f]{32}$/;

describe("Client.timeTravel over the wire", () => {
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

  test("each point goes on the wire as its kind, with the run, the reason, dryRun and a request ID", async () => {
    fake.answers.set("TimeTravel", () => ({ runId: "r-2", alreadyDone: false }));
    const at = new Date("2030-01-02T03:04:05.678Z");
    // The server fills what a request leaves out with the defaults.
    const none = { eventTimeMs: 0, stepType: "", stepExecutionId: "" };
    const cases: [TimeTravelPoint, Record<string, unknown>][] = [
      [{ beginning: true }, { ...none, kind: "TIME_TRAVEL_BEGINNING" }],
      [{ eventTime: at }, { ...none, kind: "TIME_TRAVEL_EVENT_TIME", eventTimeMs: at.getTime() }],
      // A fraction of a millisecond: the records at or before it.
      [{ eventTime: 1_700_000_000_123.9 }, { ...none, kind: "TIME_TRAVEL_EVENT_TIME", eventTimeMs: 1_700_000_000_123 }],
      [{ stepType: "Charge" }, { ...none, kind: "TIME_TRAVEL_LATEST_OF_STEP_TYPE", stepType: "Charge" }],
      [{ stepType: charge, which: "latest" }, { ...none, kind: "TIME_TRAVEL_LATEST_OF_STEP_TYPE", stepType: "Charge" }],
      [{ stepType: charge, which: "first" }, { ...none, kind: "TIME_TRAVEL_FIRST_OF_STEP_TYPE", stepType: "Charge" }],
      [{ stepExecutionId: "Charge-2" }, { ...none, kind: "TIME_TRAVEL_STEP_EXECUTION", stepExecutionId: "Charge-2" }],
    ];
    for (const [point, wire] of cases) {
      const result = await client.timeTravel("f-1", "r-1", point);
      assert.deepEqual(result, { runId: "r-2", alreadyDone: false }, "a real time travel answers no start");
      const request = fake.lastCall("TimeTravel");
      assert.deepEqual(request.point, wire, JSON.stringify(point));
      assert.deepEqual(request.flow, { flowId: "f-1", runId: "r-1" });
      assert.deepEqual([request.reason, request.dryRun], ["", false]);
      assert.match(request.requestId, HEX_ID);
    }

    await client.timeTravel("f-1", "r-1", { beginning: true }, { reason: "fixed the charge bug", requestId: "tt-1", dryRun: true });
    const request = fake.lastCall("TimeTravel");
    assert.deepEqual([request.reason, request.requestId, request.dryRun], ["fixed the charge bug", "tt-1", true]);
  });

  test("a dry run's start and Attributes are converted as getFlowState and getAttributes convert theirs", async () => {
    fake.answers.set("TimeTravel", () => ({
      runId: "preview-1",
      alreadyDone: false,
      start: {
        flow: {
          flowId: "f-1",
          runId: "preview-1",
          flowType: "Shop",
          declarationVersion: 2,
          status: "FLOW_RUNNING",
          outputs: [],
          input: { data: Buffer.from('{"amount":5}') },
          runs: 2,
          traveledFromRunId: "r-1",
        },
        active: [{ stepExecutionId: "Charge-1", stepType: "Charge", phase: "PHASE_EXECUTE", method: "EXECUTE", taskState: "TASK_QUEUED", attempt: 1 }],
        workers: [],
      },
      attributes: [{ key: "stage", instanceKey: "", value: { stringValue: "ordered" } }],
    }));
    const result = await client.timeTravel("f-1", "r-1", { stepType: "Charge" }, { dryRun: true });
    assert.equal(result.runId, "preview-1");
    assert.equal(result.alreadyDone, false);
    const start = result.start;
    assert.ok(start !== undefined);
    assert.deepEqual(
      [start.flow.runId, start.flow.status, start.flow.declarationVersion, start.flow.input, start.flow.traveledFromRunId, start.flow.traveledToRunId],
      ["preview-1", "RUNNING", 2, { amount: 5 }, "r-1", ""],
    );
    assert.deepEqual(
      start.active.map((a) => [a.stepExecutionId, a.phase, a.method, a.taskState]),
      [["Charge-1", "EXECUTE", "EXECUTE", "QUEUED"]],
    );
    assert.deepEqual(start.workers, []);
    assert.equal(start.timeoutHandler, undefined);
    assert.deepEqual([result.attributes?.runId, result.attributes?.status, result.attributes?.get(stage)], ["preview-1", "RUNNING", "ordered"]);
  });

  test("a repeat after UNAVAILABLE carries the same request ID, and its answer says alreadyDone", async () => {
    const from = fake.calls.length;
    let seen = 0;
    fake.answers.set("TimeTravel", () =>
      ++seen === 1
        ? { error: { code: grpc.status.UNAVAILABLE, details: "the process lost its lease; the write's outcome is unknown" } }
        : // The first try landed: the server answers the run it made.
          { runId: "r-2", alreadyDone: true },
    );
    const result = await client.timeTravel("f-1", "r-1", { stepExecutionId: "Charge-1" }, { reason: "retry the charge" });
    assert.deepEqual(result, { runId: "r-2", alreadyDone: true });
    const tries = fake.calls.slice(from).filter((c) => c.method === "TimeTravel").map((c) => c.request);
    assert.equal(tries.length, 2);
    assert.match(tries[0].requestId, HEX_ID);
    assert.deepEqual(tries[1], tries[0], "the repeat is the same request");
  });

  test("the server's refusals keep their codes and are not repeated; DEADLINE_EXCEEDED names the request ID", async () => {
    for (const [code, name, details] of [
      [grpc.status.FAILED_PRECONDITION, "FAILED_PRECONDITION", "run 'r-0' is not the latest run of Flow 'f-1' ('r-1' is): time travel starts from the latest run"],
      [grpc.status.NOT_FOUND, "NOT_FOUND", "run 'r-1' of Flow 'f-1' has no execution of Step type 'Refund'"],
    ] as const) {
      const from = fake.calls.length;
      fake.answers.set("TimeTravel", () => ({ error: { code, details } }));
      await assert.rejects(client.timeTravel("f-1", "r-0", { stepType: "Refund" }), (e: unknown) => {
        assert.ok(e instanceof DexError, String(e));
        assert.equal(e.code, name);
        assert.equal(e.details, details);
        return true;
      });
      assert.equal(fake.calls.length - from, 1);
    }

    fake.answers.set("TimeTravel", () => ({ error: { code: grpc.status.DEADLINE_EXCEEDED, details: "the record was not durable in time" } }));
    await assert.rejects(client.timeTravel("f-1", "r-1", { beginning: true }, { requestId: "late-1" }), (e: unknown) => {
      assert.ok(e instanceof DexError, String(e));
      assert.equal(e.code, "DEADLINE_EXCEEDED");
      assert.match(e.message, /the outcome of the time travel of f-1 from run r-1 is unknown; a repeat with request ID 'late-1'/);
      return true;
    });
  });

  test("bad input is refused with INVALID_ARGUMENT naming the field, before anything is sent", async () => {
    fake.answers.set("TimeTravel", () => ({ runId: "r-2", alreadyDone: false }));
    const call = (flowId: unknown, runId: unknown, point: unknown, options: Record<string, unknown> = {}): Promise<unknown> =>
      client.timeTravel(flowId as string, runId as string, point as TimeTravelPoint, options);
    const cases: [string, () => Promise<unknown>, RegExp][] = [
      ["no Flow ID", () => call("", "r-1", { beginning: true }), /timeTravel: the Flow ID must be a non-empty string/],
      ["a Flow ID too long", () => call("f".repeat(256), "r-1", { beginning: true }), /timeTravel: the Flow ID .* is longer than 255 bytes/],
      ["no run ID", () => call("f-1", "", { beginning: true }), /timeTravel: the run ID must be a non-empty string: time travel starts from the Flow ID's latest run, named exactly/],
      ["an undefined run ID", () => call("f-1", undefined, { beginning: true }), /timeTravel: the run ID must be a non-empty string/],
      ["a run ID with a control character", () => call("f-1", "r\u00011", { beginning: true }), /timeTravel: the run ID .* contains a control character/],
      ["no point", () => call("f-1", "r-1", undefined), /timeTravel: point must be one of \{ beginning: true \}, \{ eventTime \}/],
      ["an empty point", () => call("f-1", "r-1", {}), /timeTravel: point must have exactly one of beginning, eventTime, stepType, stepExecutionId \(it has none\)/],
      ["two points at once", () => call("f-1", "r-1", { beginning: true, stepType: "Charge" }), /timeTravel: point must have exactly one of .* \(it has beginning, stepType\)/],
      ["beginning: false", () => call("f-1", "r-1", { beginning: false }), /timeTravel: point\.beginning must be true, not false/],
      ["an invalid Date", () => call("f-1", "r-1", { eventTime: new Date("not a date") }), /timeTravel: point\.eventTime must be a valid Date or Unix milliseconds/],
      ["a negative time", () => call("f-1", "r-1", { eventTime: -1 }), /timeTravel: point\.eventTime must be a valid Date or Unix milliseconds, not -1/],
      ["a time as text", () => call("f-1", "r-1", { eventTime: "yesterday" }), /timeTravel: point\.eventTime must be .*, not yesterday/],
      ["an empty Step type", () => call("f-1", "r-1", { stepType: "" }), /timeTravel: point\.stepType must be a non-empty string/],
      ["a Step type that is not one", () => call("f-1", "r-1", { stepType: 7 }), /timeTravel: point\.stepType must be a Step type name or a Step, not 7/],
      ["a bad which", () => call("f-1", "r-1", { stepType: "Charge", which: "middle" }), /timeTravel: point\.which must be "first" or "latest", not middle/],
      ["which without a Step type", () => call("f-1", "r-1", { beginning: true, which: "first" }), /timeTravel: point\.which goes with stepType only/],
      ["a Step execution with a newline", () => call("f-1", "r-1", { stepExecutionId: "Charge\n1" }), /timeTravel: point\.stepExecutionId .* contains a control character/s],
      ["a requestId with a control character", () => call("f-1", "r-1", { beginning: true }, { requestId: "a\nb" }), /timeTravel: requestId .* contains a control character/s],
      ["a requestId over 255 bytes", () => call("f-1", "r-1", { beginning: true }, { requestId: "é".repeat(128) }), /timeTravel: requestId .* is longer than 255 bytes/],
      ["a reason that is not text", () => call("f-1", "r-1", { beginning: true }, { reason: 5 }), /timeTravel: reason must be a string, not 5/],
      ["dryRun that is not a boolean", () => call("f-1", "r-1", { beginning: true }, { dryRun: "yes" }), /timeTravel: dryRun must be a boolean, not yes/],
    ];
    const before = fake.calls.length;
    for (const [what, send, why] of cases) {
      await assert.rejects(send(), (e: unknown) => {
        assert.ok(e instanceof DexError, `${what}: ${String(e)}`);
        assert.equal(e.code, "INVALID_ARGUMENT", what);
        assert.match(e.message, why, what);
        return true;
      });
    }
    assert.equal(fake.calls.length, before, "nothing was sent");
  });

  test("descriptions and history events carry the time travel links and the point", async () => {
    fake.answers.set("DescribeFlow", () => ({
      flowId: "f-1",
      runId: "r-1",
      flowType: "Shop",
      status: "FLOW_FAILED",
      outputs: [],
      runs: 2,
      traveledToRunId: "r-2",
    }));
    const old = await client.describeFlow("f-1", { runId: "r-1" });
    assert.deepEqual([old.status, old.traveledFromRunId, old.traveledToRunId], ["FAILED", "", "r-2"]);

    fake.answers.set("GetHistoryEvents", () => ({
      runId: "r-2",
      events: [
        {
          seq: 1,
          kind: "FLOW_STARTED",
          reason: "fixed the charge bug",
          traveledFromRunId: "r-1",
          timeTravelPoint: { kind: "TIME_TRAVEL_LATEST_OF_STEP_TYPE", stepType: "Charge" },
        },
        { seq: 2, kind: "FLOW_STARTED", timeTravelPoint: { kind: "TIME_TRAVEL_EVENT_TIME", eventTimeMs: 1234 } },
        { seq: 3, kind: "FLOW_STARTED", timeTravelPoint: { kind: "TIME_TRAVEL_BEGINNING" } },
        { seq: 4, kind: "FLOW_STARTED", timeTravelPoint: { kind: "TIME_TRAVEL_FIRST_OF_STEP_TYPE", stepType: "Charge" } },
        { seq: 5, kind: "FLOW_STARTED", timeTravelPoint: { kind: "TIME_TRAVEL_STEP_EXECUTION", stepExecutionId: "Charge-2" } },
        { seq: 6, kind: "TIME_TRAVELED", nextRunId: "r-3", reason: "again" },
        // A FLOW_STARTED that no time travel made: no point.
        { seq: 7, kind: "FLOW_STARTED" },
      ],
      more: false,
    }));
    const events = (await client.getHistoryEvents("f-1")).events;
    const [traveled, ...rest] = events;
    assert.deepEqual(
      [traveled?.kind, traveled?.reason, traveled?.traveledFromRunId, traveled?.timeTravelPoint],
      ["FLOW_STARTED", "fixed the charge bug", "r-1", { stepType: "Charge", which: "latest" }],
    );
    assert.deepEqual(
      rest.slice(0, 4).map((e) => e.timeTravelPoint),
      [{ eventTime: 1234 }, { beginning: true }, { stepType: "Charge", which: "first" }, { stepExecutionId: "Charge-2" }],
    );
    const [, , , , away, plain] = rest;
    assert.deepEqual([away?.kind, away?.nextRunId, away?.reason], ["TIME_TRAVELED", "r-3", "again"]);
    assert.deepEqual([plain?.traveledFromRunId, plain?.timeTravelPoint, "timeTravelPoint" in (plain ?? {})], ["", undefined, false]);

    // A point from the history can be passed back as it is.
    const point = traveled?.timeTravelPoint;
    assert.ok(point !== undefined);
    fake.answers.set("TimeTravel", () => ({ runId: "r-3", alreadyDone: false }));
    await client.timeTravel("f-1", "r-2", point);
    assert.deepEqual(fake.lastCall("TimeTravel").point, { kind: "TIME_TRAVEL_LATEST_OF_STEP_TYPE", eventTimeMs: 0, stepType: "Charge", stepExecutionId: "" });
  });
});
