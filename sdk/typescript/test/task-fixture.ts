// What the unit tests of runFlowTask share: payload helpers, a matcher for
// INVALID_ARGUMENT errors and a FlowTask with every field set, to which each
// test file gives its own Flow, Step and IDs.
import assert from "node:assert/strict";

import { DexError } from "../src/index";
import type { WireFlowTask, WirePayload } from "../src/proto";

export const json = (v: unknown): WirePayload => ({ data: Buffer.from(JSON.stringify(v)) });
export const text = (p: WirePayload | null | undefined): string => Buffer.from(p?.data ?? []).toString("utf8");

/** For assert.throws / rejects: a DexError INVALID_ARGUMENT whose message matches `pattern`. */
export function invalidArgument(pattern: RegExp): (e: unknown) => boolean {
  return (e: unknown) => {
    assert.ok(e instanceof DexError, `not a DexError: ${String(e)}`);
    assert.equal(e.code, "INVALID_ARGUMENT");
    assert.match(e.message, pattern);
    return true;
  };
}

/** A FlowTask of attempt 1 of an EXECUTE: `mine` (a file's defaults), then `over` (a test's). */
export function wireTask(mine: Partial<WireFlowTask>, over: Partial<WireFlowTask>): WireFlowTask {
  return {
    taskId: "e1.1",
    flowId: "f-1",
    runId: "r-1",
    flowType: "T",
    declarationVersion: 1,
    stepType: "A",
    stepExecutionId: "A-1",
    method: "EXECUTE",
    attempt: 1,
    firstAttemptUnixMs: 1,
    scheduledBy: "",
    input: json(null),
    locals: null,
    conditions: [],
    waitForFailed: false,
    recoveryError: "",
    attemptTimeoutMs: 60_000,
    heartbeatTimeoutMs: 0,
    rpcName: "",
    attributes: [],
    ...mine,
    ...over,
  };
}
