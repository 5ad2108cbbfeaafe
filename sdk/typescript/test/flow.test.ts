// The dex Flow model without a server: the builders (conditions, waits,
// decisions, options), their encoding as the wire's messages, the Flow's
// declaration, the task runner, and bad input with clear errors.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  Channel,
  ChannelMap,
  Flow,
  StepDecision,
  TaskError,
  Timer,
  Wait,
  deadEnd,
  decisionToWire,
  forceComplete,
  forceCompleteIfChannelsEmpty,
  forceFail,
  goTo,
  goToMulti,
  gracefulComplete,
  runFlowTask,
  stepOptionsToWire,
  type Codec,
  type Step,
} from "../src/index";
import type { WireFlowTask } from "../src/proto";
import { invalidArgument, json, text, wireTask } from "./task-fixture";


const task = (over: Partial<WireFlowTask>): WireFlowTask =>
  wireTask({ input: json({ n: 1 }) }, over);

const approval = new Channel<{ ok: boolean }>("approval");
const perUser = new ChannelMap<string>("per-user");

describe("conditions and waits", () => {
  test("Timers, Channel conditions and IDs encode as the wire's Condition", () => {
    assert.deepEqual(Timer.after(1500).spec, { conditionId: "", timer: { durationMs: 1500 } });
    assert.deepEqual(Timer.at(new Date(5000), "deadline").spec, { conditionId: "deadline", timer: { atUnixMs: 5000 } });
    assert.deepEqual(approval.forOne("a").spec, {
      conditionId: "a",
      channel: { channel: "approval", instanceKey: "", match: "FOR_ONE", min: 0, max: 0 },
    });
    assert.equal(approval.forN(3).spec.channel?.min, 3);
    assert.deepEqual(approval.atLeast(2).spec.channel, { channel: "approval", instanceKey: "", match: "AT_LEAST", min: 2, max: 0 });
    assert.deepEqual(approval.atMost(4).spec.channel?.max, 4);
    assert.deepEqual(perUser.instance("ann").atLeastAtMost(1, 5).spec.channel, {
      channel: "per-user",
      instanceKey: "ann",
      match: "AT_LEAST_AT_MOST",
      min: 1,
      max: 5,
    });
    assert.equal(Timer.after(10).withId("t").id, "t");
  });

  test("anyOf, allOf, anyCombinationOf and skip", () => {
    const w = Wait.anyOf(approval.forOne(), Timer.after(100));
    assert.equal(w.spec.kind, "ANY_OF");
    assert.equal(w.spec.conditions.length, 2);
    assert.equal(Wait.allOf(Timer.after(1)).spec.kind, "ALL_OF");
    const c = Wait.anyCombinationOf([["a", "t"], ["b"]], approval.forOne("a"), approval.forN(2, "b"), Timer.after(5, "t"));
    assert.deepEqual(c.spec.combinations, [{ conditionIds: ["a", "t"] }, { conditionIds: ["b"] }]);
    assert.deepEqual(Wait.skip().spec, { kind: "SKIP", conditions: [], combinations: [] });
  });

  test("bad waits: no conditions, anyCombinationOf without IDs, unknown IDs, too many", () => {
    assert.throws(() => Wait.anyOf(), invalidArgument(/Wait.anyOf needs at least one condition/));
    assert.throws(() => Wait.allOf(), invalidArgument(/Wait.allOf needs at least one condition/));
    assert.throws(
      () => Wait.anyCombinationOf([["a"]], approval.forOne("a"), Timer.after(5)),
      invalidArgument(/condition 2 has no ID; every condition needs one/),
    );
    assert.throws(() => Wait.anyCombinationOf([], approval.forOne("a")), invalidArgument(/at least one combination/));
    assert.throws(
      () => Wait.anyCombinationOf([["a", "nope"]], approval.forOne("a")),
      invalidArgument(/names 'nope', which is not a condition ID/),
    );
    assert.throws(() => Wait.anyOf(approval.forOne("x"), Timer.after(1, "x")), invalidArgument(/'x' is used twice/));
    const many = Array.from({ length: 101 }, () => Timer.after(1));
    assert.throws(() => Wait.anyOf(...many), invalidArgument(/101 conditions; the limit is 100/));
    assert.throws(() => Timer.after(-1), invalidArgument(/non-negative/));
    assert.throws(() => approval.forN(0), invalidArgument(/n >= 1/));
    assert.throws(() => approval.atLeastAtMost(3, 2), invalidArgument(/min <= max/));
    assert.throws(() => new Channel(""), invalidArgument(/Channel name must be a non-empty string/));
    assert.throws(() => new Channel("a\nb"), invalidArgument(/control character/));
  });
});

describe("decisions", () => {
  test("goTo, goToMulti with per-movement input and options, cancels", () => {
    const d = goToMulti(
      { step: "B", input: { x: 1 } },
      { step: { type: "C" }, input: [2], options: { execute: { attemptTimeoutMs: 5000, retry: { maximumAttempts: 0 } } } },
    )
      .cancelSteps("Q", { type: "R" })
      .cancelSiblings();
    const wire = decisionToWire(d);
    assert.deepEqual(wire.cancelStepTypes, ["Q", "R"]);
    assert.equal(wire.cancelSiblings, true);
    assert.equal(wire.goTo?.movements.length, 2);
    assert.equal(wire.goTo?.movements[0]?.stepType, "B");
    assert.equal(text(wire.goTo?.movements[0]?.input), '{"x":1}');
    assert.deepEqual(wire.goTo?.movements[1]?.options, { execute: { attemptTimeoutMs: 5000, retry: { maximumAttempts: 0 } } });
    assert.equal(text(decisionToWire(goTo("B")).goTo?.movements[0]?.input), "", "no input: the empty payload (null)");
  });

  test("completions, failure, dead end, complete-if-channels-empty", () => {
    assert.equal(text(decisionToWire(gracefulComplete({ done: true })).gracefulComplete), '{"done":true}');
    assert.equal(text(decisionToWire(forceComplete("x")).forceComplete), '"x"');
    assert.equal(decisionToWire(forceFail("why")).forceFail, "why");
    assert.deepEqual(decisionToWire(deadEnd()).deadEnd, {});
    const wire = decisionToWire(
      forceCompleteIfChannelsEmpty({ channels: [approval, perUser], output: 7, otherwise: [{ step: "A", input: 1 }] }),
    );
    assert.deepEqual(wire.forceCompleteIfChannelsEmpty?.channels, [
      { channel: "approval", instanceKey: "", allInstances: false },
      { channel: "per-user", instanceKey: "", allInstances: true },
    ]);
    assert.equal(text(wire.forceCompleteIfChannelsEmpty?.output), "7");
    assert.equal(wire.forceCompleteIfChannelsEmpty?.otherwise[0]?.stepType, "A");
    // Immutable: cancelSteps returns a new decision.
    const base = deadEnd();
    base.cancelSteps("X");
    assert.deepEqual(base.cancelStepTypes, []);
  });

  test("StepOptions encode with the failure policies", () => {
    assert.deepEqual(
      stepOptionsToWire({
        waitFor: { proceedToExecute: true, durability: "async", heartbeatTimeoutMs: 100 },
        execute: { recoveryStep: "Refund", retry: { initialIntervalMs: 10, backoffCoefficient: 1.5, maximumIntervalMs: 99, totalDurationMs: 1000 } },
      }),
      {
        waitFor: { failurePolicy: "PROCEED_TO_EXECUTE", durability: "ASYNC", heartbeatTimeoutMs: 100 },
        execute: {
          failurePolicy: "PROCEED_TO_STEP",
          recoveryStepType: "Refund",
          retry: { initialIntervalMs: 10, backoffCoefficient: 1.5, maximumIntervalMs: 99, totalDurationMs: 1000 },
        },
      },
    );
    assert.throws(() => stepOptionsToWire({ execute: { retry: { backoffCoefficient: 0.5 } } }), invalidArgument(/backoffCoefficient must be a number >= 1/));
    assert.throws(() => stepOptionsToWire({ execute: { durability: "later" as "sync" } }), invalidArgument(/durability/));
    assert.throws(() => goToMulti(), invalidArgument(/at least one StepMovement/));
    assert.throws(() => goTo(""), invalidArgument(/must be a non-empty string/));
  });
});

describe("Flow declarations", () => {
  const a: Step = { type: "A", execute: () => goTo("B") };
  const b: Step = { type: "B", waitFor: () => Wait.anyOf(approval.forOne()), execute: () => gracefulComplete(), options: { execute: { attemptTimeoutMs: 9 } } };

  test("a Flow declares its start Step, Steps (with WaitFor and options) and Channels", () => {
    const flow = new Flow({
      type: "T",
      startStep: a,
      steps: [a, b],
      channels: [approval, perUser],
      defaultStepOptions: { execute: { retry: { maximumAttempts: 5 }, attemptTimeoutMs: 1 } },
    });
    assert.deepEqual(flow.declaration(), {
      flowType: "T",
      startStepType: "A",
      steps: [
        { stepType: "A", hasWaitFor: false, options: { execute: { attemptTimeoutMs: 1, retry: { maximumAttempts: 5 } } }, attributeReads: [] },
        { stepType: "B", hasWaitFor: true, options: { execute: { attemptTimeoutMs: 9, retry: { maximumAttempts: 5 } } }, attributeReads: [] },
      ],
      channels: [
        { name: "approval", isMap: false },
        { name: "per-user", isMap: true },
      ],
      attributes: [],
      rpcs: [],
    });
  });

  test("bad Flows say what is wrong", () => {
    assert.throws(() => new Flow({ type: "T", startStep: "Z", steps: [a] }), invalidArgument(/start Step 'Z' is not one of its Steps \(A\)/));
    assert.throws(() => new Flow({ type: "T", startStep: "A", steps: [a, a] }), invalidArgument(/lists the Step type 'A' twice/));
    assert.throws(() => new Flow({ type: "T", startStep: "A", steps: [] }), invalidArgument(/needs at least one Step/));
    assert.throws(
      () => new Flow({ type: "T", startStep: "A", steps: [a], channels: [approval, new Channel("approval")] }),
      invalidArgument(/declares the Channel 'approval' twice/),
    );
    assert.throws(
      () => new Flow({ type: "T", startStep: "A", steps: [{ ...a, options: { execute: { recoveryStep: "Nope" } } }] }),
      invalidArgument(/recoveryStep 'Nope' of Step 'A' is not one of its Steps/),
    );
    assert.throws(() => new Flow({ type: "", startStep: "A", steps: [a] }), invalidArgument(/Flow type must be a non-empty string/));
  });
});

describe("the task runner", () => {
  const flowOf = (steps: Step[], channels: (Channel<any> | ChannelMap<any>)[] = [approval]): Flow =>
    new Flow({ type: "T", startStep: steps[0] as Step, steps, channels });
  const never = new AbortController().signal;

  test("WaitFor: the wait and the locals; Execute: conditions, messages, locals, publishes", async () => {
    const step: Step<{ n: number }> = {
      type: "A",
      waitFor(ctx) {
        ctx.setLocal("seen", ctx.input.n);
        return Wait.anyOf(approval.forOne("ok"), Timer.after(10, "t"));
      },
      execute(ctx) {
        assert.equal(ctx.getLocal("seen"), 1);
        assert.equal(ctx.fired("ok"), true);
        assert.equal(ctx.fired(1), false);
        assert.equal(ctx.timerFired(), false);
        ctx.publish(approval, { ok: false }, { ok: true });
        return gracefulComplete({ got: ctx.messages(approval) });
      },
    };
    const flow = flowOf([step as Step]);
    const waited = await runFlowTask(flow, task({ method: "WAIT_FOR" }), never, () => true);
    assert.equal(waited.wait?.kind, "ANY_OF");
    assert.equal(text(waited.locals), '{"seen":1}');
    const executed = await runFlowTask(
      flow,
      task({
        locals: json({ seen: 1 }),
        conditions: [
          { index: 0, conditionId: "ok", fired: true, skipped: false, messages: [json({ ok: true })], condition: approval.forOne("ok").spec },
          { index: 1, conditionId: "t", fired: false, skipped: false, messages: [], condition: Timer.after(10, "t").spec },
        ],
      }),
      never,
      () => true,
    );
    assert.equal(executed.error, undefined, JSON.stringify(executed.error));
    assert.equal(text(executed.decision?.gracefulComplete), '{"got":[{"ok":true}]}');
    assert.equal(executed.publishes?.length, 1);
    assert.equal(executed.publishes?.[0]?.messages.length, 2);
  });

  test("a Channel's codec encodes its messages", async () => {
    const upper: Codec<string> = {
      encode: (s) => Buffer.from(s.toUpperCase()),
      decode: (d) => Buffer.from(d).toString().toLowerCase(),
    };
    const shout = new Channel<string>("shout", { codec: upper });
    const flow = flowOf([{ type: "A", execute: (ctx) => (ctx.publish(shout, "hi"), deadEnd()) }], [shout]);
    const r = await runFlowTask(flow, task({}), never, () => true);
    assert.equal(text(r.publishes?.[0]?.messages[0]), "HI");
  });

  test("errors: thrown TaskError keeps nonRetryable and retryAfterMs; other errors are retryable", async () => {
    const flow = flowOf([
      {
        type: "A",
        execute: (ctx) => {
          if (ctx.attempt === 1) throw new TaskError("no funds", { nonRetryable: true });
          if (ctx.attempt === 3) throw new TaskError("rate limited", { retryAfterMs: 45_000 });
          throw new RangeError("boom");
        },
      },
    ]);
    assert.deepEqual((await runFlowTask(flow, task({}), never, () => true)).error, { message: "no funds", nonRetryable: true });
    assert.deepEqual((await runFlowTask(flow, task({ attempt: 2 }), never, () => true)).error, {
      message: "RangeError: boom",
      nonRetryable: false,
    });
    assert.deepEqual((await runFlowTask(flow, task({ attempt: 3 }), never, () => true)).error, {
      message: "rate limited",
      nonRetryable: false,
      retryAfterMs: 45_000,
    });
    for (const bad of [-1, 1.5, 31 * 24 * 3600 * 1000, Number.NaN]) {
      assert.throws(() => new TaskError("x", { retryAfterMs: bad }), /retryAfterMs must be whole milliseconds/);
    }
  });

  test("bad results: an undeclared Step, an undeclared Channel, a Wait without conditions, anyCombinationOf without IDs, not a decision", async () => {
    const cases: [Step, string, RegExp][] = [
      [{ type: "A", execute: () => goTo("Nowhere") }, "EXECUTE", /Step 'A-1' decided goTo 'Nowhere', which Flow 'T' does not declare \(its Steps: A\)/],
      [{ type: "A", execute: () => deadEnd().cancelSteps("Ghost") }, "EXECUTE", /to cancel the Step type 'Ghost'/],
      [{ type: "A", execute: (ctx) => (ctx.publish(new Channel("other"), 1), deadEnd()) }, "EXECUTE", /publishes to the Channel 'other', which Flow 'T' does not declare/],
      [{ type: "A", waitFor: () => Wait.anyOf(new Channel("other").forOne()), execute: () => deadEnd() }, "WAIT_FOR", /waits on the Channel 'other'/],
      [{ type: "A", waitFor: () => Wait.anyOf(), execute: () => deadEnd() }, "WAIT_FOR", /Wait.anyOf needs at least one condition/],
      [
        { type: "A", waitFor: () => Wait.anyCombinationOf([["x"]], approval.forOne()), execute: () => deadEnd() },
        "WAIT_FOR",
        /condition 1 has no ID/,
      ],
      [{ type: "A", execute: () => "done" as unknown as StepDecision }, "EXECUTE", /returned a string, not a StepDecision/],
      [{ type: "A", waitFor: () => undefined as unknown as Wait, execute: () => deadEnd() }, "WAIT_FOR", /returned undefined, not a Wait/],
    ];
    for (const [step, method, pattern] of cases) {
      const r = await runFlowTask(flowOf([step]), task({ method }), never, () => true);
      assert.ok(r.error !== undefined, `no error for ${String(pattern)}`);
      assert.match(r.error.message, pattern);
      assert.equal(r.error.nonRetryable, true, r.error.message);
      assert.equal(r.decision, undefined);
      assert.equal(r.wait, undefined);
    }
    const unknown = await runFlowTask(flowOf([{ type: "A", execute: () => deadEnd() }]), task({ stepType: "B" }), never, () => true);
    assert.match(unknown.error?.message ?? "", /has no Step type 'B'/);
  });
});
