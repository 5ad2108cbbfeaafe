// SubFlows, the Flow retry policy and the timeout handler without a server:
// SubFlow conditions and their encoding, the start options' checks, what
// execute reads of a child through the task runner (JSON and typed), the
// derived Flow ID limit, the timeout handler's declaration and its task.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Attribute,
  Channel,
  Flow,
  SubFlow,
  Timer,
  Wait,
  deadEnd,
  forceFail,
  goTo,
  gracefulComplete,
  runFlowTask,
  subFlowId,
  type Codec,
  type Step,
  type SubFlowResult,
} from "../src/index";
import type { WireConditionResult, WireFlowTask } from "../src/proto";
import { invalidArgument, json, text, wireTask } from "./task-fixture";


const task = (over: Partial<WireFlowTask>): WireFlowTask =>
  wireTask({ flowId: "p-1", flowType: "Parent", stepType: "Fan", stepExecutionId: "Fan-1" }, over);

const status = Attribute.string("status");
const child = new Flow({
  type: "Child",
  startStep: "Double",
  steps: [{ type: "Double", execute: (ctx) => gracefulComplete((ctx.input as number) * 2) }],
  attributes: [status],
});
const guarded = new Flow({
  type: "Guarded",
  startStep: "Work",
  steps: [{ type: "Work", execute: () => deadEnd() }],
  attributes: [status],
  handleTimeout(ctx) {
    status.set(ctx, `timed out (attempt ${ctx.attempt})`);
    return forceFail("the deadline passed");
  },
});

/** The ConditionResult the server sends an execute task for SubFlow condition `index`. */
function subFlowMet(index: number, id: string, flowType: string, childStatus: string, outputs: unknown[], fired = true): WireConditionResult {
  return {
    index,
    conditionId: id,
    fired,
    skipped: false,
    messages: [],
    condition: { conditionId: id, subFlow: { flowType, input: json(index), options: null, reusePolicy: "SUB_FLOW_REUSE_POLICY_UNSPECIFIED" } },
    subFlow: {
      flowId: subFlowId("p-1", "Fan-1", index),
      runId: "r-1",
      status: childStatus,
      outputs: outputs.map((o, i) => ({ stepType: "Double", stepExecutionId: `Double-${i + 1}`, output: json(o) })),
      closeReason: childStatus === "FLOW_FAILED" ? "boom" : "",
    },
  };
}

describe("SubFlow conditions", () => {
  test("start encodes the child's type, JSON input, start options, reuse policy and condition ID", () => {
    const sub = new SubFlow<number, number>(child, { options: { flowTimeoutMs: 60_000, reusePolicy: "attach" } });
    const c = sub.start(21, {
      id: "a",
      startDelayMs: 500,
      timeoutPolicy: "cancel",
      initialAttributes: [status.write("queued")],
      retryPolicy: { maximumAttempts: 2, initialIntervalMs: 100, backoffCoefficient: 1.5 },
    });
    assert.equal(c.id, "a");
    assert.deepEqual(c.spec, {
      conditionId: "a",
      subFlow: {
        flowType: "Child",
        input: { data: Buffer.from("21") },
        options: {
          timeoutMs: 60_000,
          timeoutPolicy: "TIMEOUT_CANCEL",
          startDelayMs: 500,
          initialAttributes: [{ key: "status", instanceKey: "", value: { stringValue: "queued" } }],
          retryPolicy: { initialIntervalMs: 100, maximumAttempts: 2, backoffCoefficient: 1.5 },
        },
        reusePolicy: "SUB_FLOW_ATTACH",
      },
    });
    // Defaults: no options, the server's reuse policy; a type name works as well as a Flow.
    assert.deepEqual(new SubFlow("Child").start({ n: 1 }).spec, {
      conditionId: "",
      subFlow: { flowType: "Child", input: { data: Buffer.from('{"n":1}') }, options: {} },
    });
    assert.equal(sub.start(1, { reusePolicy: "alwaysRestart" }).spec.subFlow?.reusePolicy, "SUB_FLOW_ALWAYS_RESTART");
    assert.equal(
      sub.start(1, { reusePolicy: "restartIfPreviousExitsAbnormally" }).spec.subFlow?.reusePolicy,
      "SUB_FLOW_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY",
    );
    assert.equal(sub.start(1).withId("b").id, "b");
  });

  test("an input codec encodes the child's input", () => {
    const upper: Codec<string> = { encode: (s) => Buffer.from(s.toUpperCase()), decode: (b) => Buffer.from(b).toString() };
    assert.equal(text(new SubFlow("Child", { inputCodec: upper }).start("abc").spec.subFlow?.input), "ABC");
  });

  test("with a flow timeout a child that declares a timeout handler gets timeout policy HANDLER unless told otherwise", () => {
    const sub = new SubFlow(guarded);
    assert.equal(sub.hasTimeoutHandler, true);
    assert.equal(sub.start(null, { flowTimeoutMs: 1000 }).spec.subFlow?.options?.timeoutPolicy, "TIMEOUT_HANDLER");
    assert.equal(sub.start(null, { flowTimeoutMs: 1000, timeoutPolicy: "fail" }).spec.subFlow?.options?.timeoutPolicy, "TIMEOUT_FAIL");
    assert.equal(sub.start(null).spec.subFlow?.options?.timeoutPolicy, undefined);
    assert.equal(new SubFlow(child).start(1, { flowTimeoutMs: 1000 }).spec.subFlow?.options?.timeoutPolicy, undefined);
  });

  test("SubFlows mix with Timers and Channels in anyOf, allOf and anyCombinationOf", () => {
    const sub = new SubFlow<number>(child);
    const w = Wait.anyCombinationOf([["a", "b"], ["t"]], sub.start(1, { id: "a" }), sub.start(2, { id: "b" }), Timer.after(10, "t"));
    assert.deepEqual(w.spec.combinations, [{ conditionIds: ["a", "b"] }, { conditionIds: ["t"] }]);
    assert.equal(Wait.allOf(sub.start(1), sub.start(2), sub.start(3)).spec.conditions.length, 3);
    assert.equal(Wait.anyOf(sub.start(1), new Channel("c").forOne()).spec.kind, "ANY_OF");
    assert.throws(
      () => Wait.anyCombinationOf([["a"]], sub.start(1, { id: "a" }), sub.start(2)),
      invalidArgument(/condition 2 has no ID/),
    );
  });

  test("bad definitions and options are refused at once, naming the field", () => {
    const sub = new SubFlow<unknown>(child);
    assert.throws(() => new SubFlow(""), invalidArgument(/SubFlow's Flow type must be a non-empty string/));
    assert.throws(() => new SubFlow(42 as never), invalidArgument(/needs a Flow or the name of a Flow type/));
    assert.throws(() => new SubFlow(child, { options: { flowTimeoutMs: -1 } }), invalidArgument(/SubFlow 'Child': options: flowTimeoutMs must be a non-negative/));
    assert.throws(() => sub.start(1, { reusePolicy: "sometimes" as never }), invalidArgument(/reusePolicy must be one of attach, restartIfPreviousExitsAbnormally, alwaysRestart, not sometimes/));
    assert.throws(() => sub.start(1, { timeoutPolicy: "cancel" }), invalidArgument(/timeoutPolicy 'cancel' needs a flowTimeoutMs/));
    assert.throws(() => sub.start(1, { flowTimeoutMs: 5, timeoutPolicy: "later" as never }), invalidArgument(/timeoutPolicy must be one of fail, cancel, handler/));
    assert.throws(() => sub.start(1, { flowTimeoutMs: 5, timeoutPolicy: "handler" }), invalidArgument(/needs a Flow with a timeout handler/));
    assert.throws(() => sub.start(1, { initialAttributes: [status.removal()] }), invalidArgument(/initialAttributes\[0\] deletes 'status'; a start can only set values/));
    assert.throws(() => sub.start(1, { initialAttributes: [{}] as never }), invalidArgument(/initialAttributes\[0\] is not a write/));
    assert.throws(() => sub.start(1, { retryPolicy: { backoffCoefficient: 0.5 } }), invalidArgument(/retryPolicy.backoffCoefficient must be a number >= 1/));
    assert.throws(() => sub.start(1, { retryPolicy: { maximumAttempts: -1 } }), invalidArgument(/retryPolicy.maximumAttempts must be a non-negative integer/));
    assert.throws(() => sub.start(1, { id: "bad\nid" }), invalidArgument(/control character/));
    // Values over 1 MiB go to the server (its blob threshold and values.maxSize decide).
    assert.doesNotThrow(() => sub.start("x".repeat((1 << 20) + 1)));
    const cyclic: Record<string, unknown> = {};
    cyclic["self"] = cyclic;
    assert.throws(() => sub.start(cyclic), invalidArgument(/the input cannot be encoded/));
    // With a type name the SDK cannot know whether the child has a handler: the server checks.
    assert.equal(new SubFlow("Other").start(1, { flowTimeoutMs: 5, timeoutPolicy: "handler" }).spec.subFlow?.options?.timeoutPolicy, "TIMEOUT_HANDLER");
  });
});

describe("a SubFlow's result in execute", () => {
  const quote = new SubFlow<number, number>(child);
  const results: SubFlowResult<unknown>[] = [];
  const fan: Step = {
    type: "Fan",
    waitFor: () => Wait.allOf(quote.start(1, { id: "a" }), quote.start(2, { id: "b" }), quote.start(3)),
    execute(ctx) {
      results.length = 0;
      results.push(...ctx.subFlows());
      const typed = quote.results(ctx);
      const sum = typed.reduce((n, r) => n + (r.output ?? 0), 0);
      return gracefulComplete({ sum, a: quote.result(ctx, "a").output, third: ctx.subFlow(2).flowId, kinds: ctx.conditions.map((c) => c.kind) });
    },
  };
  const parent = new Flow({ type: "Parent", startStep: fan, steps: [fan] });

  test("ctx.subFlows, SubFlow.results and result(id | index) read every child's outputs", async () => {
    const result = await runFlowTask(
      parent,
      task({ conditions: [subFlowMet(0, "a", "Child", "FLOW_COMPLETED", [2]), subFlowMet(1, "b", "Child", "FLOW_COMPLETED", [4]), subFlowMet(2, "", "Child", "FLOW_COMPLETED", [6])] }),
      new AbortController().signal,
      () => true,
    );
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    assert.deepEqual(JSON.parse(text(result.decision?.gracefulComplete)), {
      sum: 12,
      a: 2,
      third: "p-1/Fan-1/2",
      kinds: ["subFlow", "subFlow", "subFlow"],
    });
    assert.deepEqual(
      results.map((r) => [r.conditionIndex, r.conditionId, r.flowType, r.flowId, r.runId, r.status, r.closed, r.fired, r.output]),
      [
        [0, "a", "Child", "p-1/Fan-1/0", "r-1", "COMPLETED", true, true, 2],
        [1, "b", "Child", "p-1/Fan-1/1", "r-1", "COMPLETED", true, true, 4],
        [2, "", "Child", "p-1/Fan-1/2", "r-1", "COMPLETED", true, true, 6],
      ],
    );
    assert.deepEqual(results[0]?.outputs.map((o) => [o.stepType, o.stepExecutionId, o.output, Buffer.from(o.payload).toString()]), [["Double", "Double-1", 2, "2"]]);
  });

  test("a child that lost an AnyOf is RUNNING, with no outputs; a failed one has its reason", async () => {
    let seen: SubFlowResult<unknown>[] = [];
    const step: Step = {
      type: "Fan",
      waitFor: () => Wait.anyOf(new SubFlow("Child").start(1), Timer.after(10)),
      execute(ctx) {
        seen = ctx.subFlows();
        return ctx.timerFired() ? deadEnd() : gracefulComplete();
      },
    };
    const flow = new Flow({ type: "Parent", startStep: step, steps: [step] });
    const timer: WireConditionResult = { index: 1, conditionId: "", fired: true, skipped: false, messages: [], condition: { conditionId: "", timer: { durationMs: 10 } } };
    const running = subFlowMet(0, "", "Child", "FLOW_RUNNING", [], false);
    const result = await runFlowTask(flow, task({ conditions: [running, timer] }), new AbortController().signal, () => true);
    assert.ok(result.decision?.deadEnd !== undefined, JSON.stringify(result));
    assert.deepEqual(
      seen.map((r) => [r.status, r.closed, r.fired, r.outputs.length, r.output, r.flowId]),
      [["RUNNING", false, false, 0, undefined, "p-1/Fan-1/0"]],
    );
    await runFlowTask(flow, task({ conditions: [subFlowMet(0, "", "Child", "FLOW_FAILED", []), timer] }), new AbortController().signal, () => true);
    assert.deepEqual(seen.map((r) => [r.status, r.closed, r.closeReason]), [["FAILED", true, "boom"]]);
  });

  test("asking for a SubFlow the wait does not have, or one of several without naming it, fails the attempt non-retryably", async () => {
    const cases: [(ctx: any) => unknown, WireConditionResult[], RegExp][] = [
      [(ctx) => ctx.subFlow(), [], /ctx.subFlow: the wait of Fan-1 has no SubFlow condition/],
      [(ctx) => ctx.subFlow(), [subFlowMet(0, "a", "Child", "FLOW_COMPLETED", [1]), subFlowMet(1, "b", "Child", "FLOW_COMPLETED", [1])], /has 2 SubFlow conditions; name one by its ID or index/],
      [(ctx) => ctx.subFlow("zz"), [subFlowMet(0, "a", "Child", "FLOW_COMPLETED", [1])], /condition "zz" is not a SubFlow condition of the wait of Fan-1 \(its SubFlows: 'a'\)/],
      [(ctx) => quote.result(ctx, 0), [subFlowMet(0, "", "Other", "FLOW_COMPLETED", [1])], /SubFlow 'Child'.result: condition 0 is not a SubFlow condition of Flow type 'Child'/],
    ];
    for (const [read, conditions, pattern] of cases) {
      const step: Step = { type: "Fan", execute: (ctx) => (read(ctx), deadEnd()) };
      const flow = new Flow({ type: "Parent", startStep: step, steps: [step] });
      const result = await runFlowTask(flow, task({ conditions }), new AbortController().signal, () => true);
      assert.equal(result.error?.nonRetryable, true, pattern.source);
      assert.match(result.error?.message ?? "", pattern);
    }
  });

  test("an output codec decodes the child's outputs; one it cannot decode fails the attempt non-retryably", async () => {
    const strict: Codec<number> = {
      encode: (n) => Buffer.from(String(n)),
      decode: (b) => {
        const n = Number(Buffer.from(b).toString());
        if (!Number.isInteger(n)) throw new Error("not an integer");
        return n;
      },
    };
    const typed = new SubFlow<number, number>("Child", { outputCodec: strict });
    let got: number | undefined;
    const step: Step = { type: "Fan", execute: (ctx) => ((got = typed.result(ctx).output), deadEnd()) };
    const flow = new Flow({ type: "Parent", startStep: step, steps: [step] });
    await runFlowTask(flow, task({ conditions: [subFlowMet(0, "", "Child", "FLOW_COMPLETED", [7])] }), new AbortController().signal, () => true);
    assert.equal(got, 7);
    const bad = await runFlowTask(flow, task({ conditions: [subFlowMet(0, "", "Child", "FLOW_COMPLETED", ["x"])] }), new AbortController().signal, () => true);
    assert.equal(bad.error?.nonRetryable, true);
    assert.match(bad.error?.message ?? "", /the output of Double-1 of the SubFlow of condition 0 cannot be decoded: not an integer/);
  });

  test("waitFor's result carries the SubFlow conditions; a derived child Flow ID over 255 bytes fails the attempt first", async () => {
    const step: Step = { type: "Fan", waitFor: () => Wait.allOf(quote.start(1), Timer.after(5)), execute: () => deadEnd() };
    const flow = new Flow({ type: "Parent", startStep: step, steps: [step] });
    const ok = await runFlowTask(flow, task({ method: "WAIT_FOR" }), new AbortController().signal, () => true);
    assert.equal(ok.wait?.conditions[0]?.subFlow?.flowType, "Child");
    const long = await runFlowTask(flow, task({ method: "WAIT_FOR", flowId: "p".repeat(250) }), new AbortController().signal, () => true);
    assert.equal(long.error?.nonRetryable, true);
    assert.match(long.error?.message ?? "", /condition 0 \(SubFlow\) of Step 'Fan-1' would start the child .* longer than 255 bytes/);
  });
});

describe("the timeout handler", () => {
  test("the declaration says a Flow has one, with its options and reads; a Flow without one declares as before", () => {
    const d = guarded.declaration();
    assert.equal(d.hasTimeoutHandler, true);
    assert.deepEqual(d.onTimeout, { options: {}, attributeReads: ["status"] });
    assert.equal(guarded.hasTimeoutHandler, true);
    assert.equal(child.hasTimeoutHandler, false);
    assert.equal("hasTimeoutHandler" in child.declaration(), false);
    assert.equal("onTimeout" in child.declaration(), false);
    const tuned = new Flow({
      type: "Tuned",
      startStep: "Work",
      steps: [{ type: "Work", execute: () => deadEnd() }],
      handleTimeout: () => forceFail("late"),
      timeoutHandlerOptions: { attemptTimeoutMs: 5000, retry: { maximumAttempts: 2 }, durability: "async", attributeReads: [] },
    });
    assert.deepEqual(tuned.declaration().onTimeout, {
      options: { attemptTimeoutMs: 5000, retry: { maximumAttempts: 2 }, durability: "ASYNC" },
      attributeReads: [],
    });
    // Nothing to declare beyond the flag: no options, no Attributes.
    const plain = new Flow({ type: "Plain", startStep: "Work", steps: [{ type: "Work", execute: () => deadEnd() }], handleTimeout: () => forceFail("late") });
    assert.equal(plain.declaration().hasTimeoutHandler, true);
    assert.equal(plain.declaration().onTimeout, undefined);
  });

  test("bad timeout handler definitions are refused", () => {
    const base = { type: "T", startStep: "W", steps: [{ type: "W", execute: () => deadEnd() }] };
    assert.throws(() => new Flow({ ...base, handleTimeout: 5 as never }), invalidArgument(/handleTimeout is not a function/));
    assert.throws(() => new Flow({ ...base, timeoutHandlerOptions: {} }), invalidArgument(/timeoutHandlerOptions without a handleTimeout/));
    assert.throws(
      () => new Flow({ ...base, handleTimeout: () => deadEnd(), timeoutHandlerOptions: { lockKeys: ["k"] } as never }),
      invalidArgument(/the timeout handler takes no lockKeys/),
    );
    assert.throws(
      () => new Flow({ ...base, handleTimeout: () => deadEnd(), timeoutHandlerOptions: { attributeReads: ["nope"] } }),
      invalidArgument(/the timeout handler reads the Attribute 'nope', which its Flow does not declare/),
    );
  });

  test("an ON_TIMEOUT task runs the handler: its decision, Attribute writes and publishes", async () => {
    const audit = new Channel<string>("audit");
    let seen: unknown[] = [];
    const flow = new Flow({
      type: "Guarded",
      startStep: "Work",
      steps: [{ type: "Work", execute: () => deadEnd() }, { type: "Cleanup", execute: () => deadEnd() }],
      attributes: [status],
      channels: [audit],
      handleTimeout(ctx) {
        seen = [ctx.flowId, ctx.runId, ctx.attempt, ctx.input, status.get(ctx), ctx.flowAttempt];
        status.set(ctx, "timed out");
        ctx.publish(audit, "late");
        return goTo("Cleanup", { why: "timeout" });
      },
    });
    const t = task({
      flowType: "Guarded",
      method: "ON_TIMEOUT",
      stepType: "",
      stepExecutionId: "timeout",
      attempt: 2,
      input: json({ order: 7 }),
      attributes: [{ key: "status", instanceKey: "", value: { stringValue: "working", value: "stringValue" } }],
      flowAttempt: 1,
    });
    const result = await runFlowTask(flow, t, new AbortController().signal, () => true);
    assert.equal(result.error, undefined, JSON.stringify(result.error));
    assert.deepEqual(seen, ["p-1", "r-1", 2, { order: 7 }, "working", 1]);
    assert.equal(result.decision?.goTo?.movements[0]?.stepType, "Cleanup");
    assert.deepEqual(result.attributeWrites, [{ key: "status", instanceKey: "", value: { stringValue: "timed out" } }]);
    assert.deepEqual(result.publishes?.map((p) => [p.channel, p.messages.map(text)]), [["audit", ['"late"']]]);
  });

  test("a handler's bad result, a throw, or a Flow without a handler fail the task with a clear error", async () => {
    const base = { type: "G", startStep: "W", steps: [{ type: "W", execute: () => deadEnd() }] };
    const t = task({ flowType: "G", method: "ON_TIMEOUT", stepType: "", stepExecutionId: "timeout" });
    const run = (flow: Flow) => runFlowTask(flow, t, new AbortController().signal, () => true);
    const none = await run(new Flow(base));
    assert.deepEqual([none.error?.nonRetryable, none.error?.message], [true, "Flow type 'G' in this Worker has no timeout handler"]);
    const wrong = await run(new Flow({ ...base, handleTimeout: () => "fail" as never }));
    assert.match(wrong.error?.message ?? "", /the timeout handler of Flow 'G' returned a string, not a StepDecision/);
    const undeclared = await run(new Flow({ ...base, handleTimeout: () => goTo("Nowhere") }));
    assert.match(undeclared.error?.message ?? "", /the timeout handler of Flow 'G' decided goTo 'Nowhere', which Flow 'G' does not declare/);
    const thrown = await run(new Flow({ ...base, handleTimeout: () => { throw new Error("flaky"); } }));
    assert.deepEqual([thrown.error?.nonRetryable, thrown.error?.message], [false, "flaky"]);
    const readsUndeclared = await run(new Flow({ ...base, attributes: [status], timeoutHandlerOptions: { attributeReads: [] }, handleTimeout: (ctx) => (status.get(ctx), forceFail("x")) }));
    assert.match(readsUndeclared.error?.message ?? "", /reads the Attribute 'status', which is not among its attributeReads/);
  });
});
