// SubFlows, the Flow retry policy and the timeout handler over the wire,
// against an in-process gRPC server that speaks api.proto (fake-dex.ts): the
// hello's timeout handler, SubFlow waits and results as protobuf carries
// them, an ON_TIMEOUT task, a start's retry policy and timeout policy, a
// waitForFlow that follows a Flow retry, and the new history and state fields.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Attribute,
  Client,
  DexError,
  Flow,
  SubFlow,
  Wait,
  Worker,
  forceFail,
  gracefulComplete,
  type Step,
} from "../src/index";
import { FakeDex } from "./fake-dex";
import { MemoryLogger } from "./helpers";

const note = Attribute.string("note");
const child = new Flow({ type: "Child", startStep: "Double", steps: [{ type: "Double", execute: (ctx) => gracefulComplete((ctx.input as number) * 2) }] });
const doubled = new SubFlow<number, number>(child, { options: { reusePolicy: "attach" } });
const fan: Step<number[]> = {
  type: "Fan",
  waitFor: (ctx) =>
    Wait.allOf(
      ...ctx.input.map((n, i) =>
        doubled.start(n, { id: `c${i}`, flowTimeoutMs: 30_000, initialAttributes: [note.write(`child ${i}`)], retryPolicy: { maximumAttempts: 2 } }),
      ),
    ),
  execute: (ctx) => gracefulComplete(doubled.results(ctx).reduce((sum, r) => sum + (r.output ?? 0), 0)),
};
const parent = new Flow({
  type: "Parent",
  startStep: fan,
  steps: [fan],
  attributes: [note],
  handleTimeout(ctx) {
    note.set(ctx, `late: ${String(note.get(ctx))}`);
    return forceFail("the parent's deadline passed");
  },
});

const payload = (v: unknown): { data: Buffer } => ({ data: Buffer.from(JSON.stringify(v)) });
const description = (over: Record<string, unknown>): Record<string, unknown> => ({
  flowId: "f-1",
  runId: "r-1",
  flowType: "Parent",
  declarationVersion: 1,
  status: "FLOW_RUNNING",
  outputs: [],
  runs: 1,
  ...over,
});

describe("SubFlows, Flow retry and the timeout handler over the wire", () => {
  let fake: FakeDex;
  let worker: Worker;
  let client: Client;

  before(async () => {
    fake = new FakeDex();
    await fake.start();
    worker = new Worker({ addresses: [fake.address], logger: new MemoryLogger(), shutdownTimeoutMs: 2_000 }).host(parent).host(child);
    void worker.run();
    await worker.ready();
    client = new Client({ addresses: [fake.address], timeoutMs: 2_000 });
  });

  after(async () => {
    client.close();
    await worker.shutdown();
    fake.stop();
  });

  test("the hello declares the timeout handler and its reads; a Flow without one does not", () => {
    const flows = fake.hellos[0].flows;
    const p = flows.find((f: any) => f.flowType === "Parent");
    const c = flows.find((f: any) => f.flowType === "Child");
    assert.equal(p.hasTimeoutHandler, true);
    assert.deepEqual(p.onTimeout?.attributeReads, ["note"]);
    assert.equal(c.hasTimeoutHandler, false);
    assert.equal(c.onTimeout, null);
  });

  test("a WaitFor's SubFlow conditions reach the server with the child's type, input, start options and reuse policy", async () => {
    const r = await fake.task({ flowType: "Parent", method: "WAIT_FOR", stepType: "Fan", stepExecutionId: "Fan-1", input: payload([1, 2, 3]) });
    assert.equal(r.result, "wait", JSON.stringify(r));
    assert.equal(r.wait.kind, "ALL_OF");
    assert.deepEqual(
      r.wait.conditions.map((c: any) => [c.conditionId, c.kind, c.subFlow.flowType, Buffer.from(c.subFlow.input.data).toString(), c.subFlow.reusePolicy]),
      [
        ["c0", "subFlow", "Child", "1", "SUB_FLOW_ATTACH"],
        ["c1", "subFlow", "Child", "2", "SUB_FLOW_ATTACH"],
        ["c2", "subFlow", "Child", "3", "SUB_FLOW_ATTACH"],
      ],
    );
    const o = r.wait.conditions[2].subFlow.options;
    assert.deepEqual(
      [o.timeoutMs, o.timeoutPolicy, o.retryPolicy.maximumAttempts, o.initialAttributes.map((a: any) => [a.key, a.value.stringValue]), o.requestId, o.idReusePolicy],
      [30_000, "TIMEOUT_POLICY_UNSPECIFIED", 2, [["note", "child 2"]], "", "ID_REUSE_POLICY_UNSPECIFIED"],
    );
  });

  test("an Execute task's SubFlow results, as the server sends them, reach execute", async () => {
    const met = (i: number, output: number): Record<string, unknown> => ({
      index: i,
      conditionId: `c${i}`,
      fired: true,
      condition: { conditionId: `c${i}`, subFlow: { flowType: "Child", input: payload(i) } },
      subFlow: { flowId: `f-1/Fan-1/${i}`, runId: "r-1", status: "FLOW_COMPLETED", outputs: [{ stepType: "Double", stepExecutionId: "Double-1", output: payload(output) }] },
    });
    const r = await fake.task({ flowType: "Parent", method: "EXECUTE", stepType: "Fan", stepExecutionId: "Fan-1", input: payload([1, 2, 3]), conditions: [met(0, 2), met(1, 4), met(2, 6)] });
    assert.equal(r.result, "decision", JSON.stringify(r));
    assert.equal(Buffer.from(r.decision.gracefulComplete.data).toString(), "12");
  });

  test("an ON_TIMEOUT task runs the handler and answers its decision with the Attribute writes", async () => {
    const r = await fake.task({
      flowType: "Parent",
      method: "ON_TIMEOUT",
      stepExecutionId: "timeout",
      input: payload([1]),
      attributes: [{ key: "note", value: { stringValue: "waiting" } }],
    });
    assert.equal(r.result, "decision", JSON.stringify(r));
    assert.equal(r.decision.forceFail, "the parent's deadline passed");
    assert.deepEqual(r.attributeWrites.map((w: any) => [w.key, w.value.stringValue]), [["note", "late: waiting"]]);
  });

  test("startFlow sends the Flow retry policy; with a flow timeout a Flow with a handler defaults to HANDLER", async () => {
    fake.answers.set("StartFlow", () => ({ runId: "r-1", alreadyStarted: false }));
    await client.startFlow(parent, "f-1", [1], { flowTimeoutMs: 5_000, retryPolicy: { maximumAttempts: 3, initialIntervalMs: 250, maximumIntervalMs: 1_000 } });
    let o = fake.lastCall("StartFlow").options;
    assert.deepEqual([o.timeoutMs, o.timeoutPolicy], [5_000, "TIMEOUT_HANDLER"]);
    assert.deepEqual([o.retryPolicy.maximumAttempts, o.retryPolicy.initialIntervalMs, o.retryPolicy.maximumIntervalMs], [3, 250, 1_000]);
    await client.startFlow(parent, "f-2", [1], { flowTimeoutMs: 5_000, timeoutPolicy: "cancel" });
    o = fake.lastCall("StartFlow").options;
    assert.deepEqual([o.timeoutPolicy, o.retryPolicy], ["TIMEOUT_CANCEL", null]);
    await client.startFlow("Parent", "f-3", [1], { flowTimeoutMs: 5_000 });
    assert.equal(fake.lastCall("StartFlow").options.timeoutPolicy, "TIMEOUT_POLICY_UNSPECIFIED"); // a name: the server's default
    await client.startFlow(child, "f-4", 1, { retryPolicy: { maximumAttempts: 0 } });
    o = fake.lastCall("StartFlow").options;
    assert.deepEqual([o.retryPolicy.maximumAttempts, o.timeoutMs], [0, 0]);

    const before = fake.calls.length;
    const refused = async (options: Record<string, unknown>, pattern: RegExp): Promise<void> => {
      await assert.rejects(client.startFlow(child, "f-5", 1, options), (e: unknown) => e instanceof DexError && e.code === "INVALID_ARGUMENT" && pattern.test(e.message));
    };
    await refused({ flowTimeoutMs: 5, timeoutPolicy: "handler" }, /startFlow: timeoutPolicy 'handler' needs a Flow with a timeout handler/);
    await refused({ timeoutPolicy: "fail" }, /startFlow: timeoutPolicy 'fail' needs a flowTimeoutMs/);
    await refused({ retryPolicy: { backoffCoefficient: 0 } }, /startFlow: retryPolicy.backoffCoefficient must be a number >= 1/);
    assert.equal(fake.calls.length, before, "nothing was sent");
  });

  test("waitForFlow follows a Flow retry to the run that closes last; with a runId it answers that run", async () => {
    const due = Date.now() + 300;
    let describes = 0;
    fake.answers.set("WaitForFlow", (req) =>
      req.flow.runId === "r-2"
        ? { closed: true, flow: description({ runId: "r-2", status: "FLOW_COMPLETED", outputs: [{ stepType: "Fan", stepExecutionId: "Fan-1", output: payload(12) }], runs: 2, flowAttempt: 2, previousRunId: "r-1" }) }
        : { closed: true, flow: description({ status: "FLOW_FAILED", closeReason: "boom", flowAttempt: 1, nextRunId: "r-2", retryUnixMs: due }) },
    );
    fake.answers.set("DescribeFlow", () =>
      ++describes === 1 || Date.now() < due
        ? description({ status: "FLOW_FAILED", flowAttempt: 1, nextRunId: "r-2", retryUnixMs: due })
        : description({ runId: "r-2", runs: 2, flowAttempt: 2, previousRunId: "r-1" }),
    );
    const last = await client.waitForFlow("f-1", { timeoutMs: 5_000 });
    assert.deepEqual([last.runId, last.status, last.output, last.flowAttempt, last.previousRunId], ["r-2", "COMPLETED", 12, 2, "r-1"]);
    assert.ok(Date.now() >= due, "it waited for the retry to be due");
    assert.deepEqual(fake.calls.filter((c) => c.method === "WaitForFlow").slice(-2).map((c) => c.request.flow.runId), ["", "r-2"]);

    const first = await client.waitForFlow("f-1", { runId: "r-1", timeoutMs: 5_000 });
    assert.deepEqual([first.runId, first.status, first.nextRunId, first.retryAt], ["r-1", "FAILED", "r-2", due]);
  });

  test("a retry that does not start before the wait's timeout rejects with FlowWaitTimeoutError naming both runs", async () => {
    const due = Date.now() + 60_000;
    const failed = description({ status: "FLOW_FAILED", flowAttempt: 1, nextRunId: "r-2", retryUnixMs: due });
    fake.answers.set("WaitForFlow", () => ({ closed: true, flow: failed }));
    fake.answers.set("DescribeFlow", () => failed);
    const started = Date.now();
    await assert.rejects(client.waitForFlow("f-1", { timeoutMs: 400 }), (e: unknown) => {
      assert.ok(e instanceof DexError);
      assert.equal(e.code, "DEADLINE_EXCEEDED");
      assert.match(e.message, /run r-1 is FAILED; its Flow retry r-2 has not started/);
      return true;
    });
    assert.ok(Date.now() - started < 2_000);
  });

  test("history events, state and descriptions show SubFlow children, parents and retry links", async () => {
    fake.answers.set("GetHistoryEvents", () => ({
      runId: "r-1",
      events: [
        { seq: 3, kind: "SUB_FLOW_STARTED", stepExecutionId: "Fan-1", childFlowId: "f-1/Fan-1/0", childRunId: "r-1", conditionIndex: 0, attached: true },
        { seq: 4, kind: "SUB_FLOW_CLOSED", stepExecutionId: "Fan-1", childFlowId: "f-1/Fan-1/0", childRunId: "r-1", status: "FLOW_COMPLETED" },
        {
          seq: 5,
          kind: "WAIT_COMPLETED",
          stepExecutionId: "Fan-1",
          conditions: [
            {
              index: 0,
              fired: true,
              condition: { subFlow: { flowType: "Child", input: payload(1), reusePolicy: "SUB_FLOW_ALWAYS_RESTART" } },
              subFlow: { flowId: "f-1/Fan-1/0", runId: "r-1", status: "FLOW_COMPLETED", outputs: [{ stepType: "Double", stepExecutionId: "Double-1", output: payload(2) }] },
            },
          ],
        },
        { seq: 6, kind: "FLOW_CLOSED", status: "FLOW_FAILED", nextRunId: "r-1.2", retryAtMs: 99 },
        { seq: 7, kind: "TIMEOUT_HANDLER_STARTED" },
      ],
      more: false,
    }));
    const page = await client.getHistoryEvents("f-1");
    const [started, closed, met, flowClosed, handler] = page.events;
    assert.deepEqual([started?.kind, started?.childFlowId, started?.childRunId, started?.conditionIndex, started?.attached], ["SUB_FLOW_STARTED", "f-1/Fan-1/0", "r-1", 0, true]);
    assert.deepEqual([closed?.kind, closed?.status], ["SUB_FLOW_CLOSED", "COMPLETED"]);
    assert.deepEqual(met?.conditions[0]?.condition, { id: "", kind: "subFlow", flowType: "Child", input: 1, reusePolicy: "ALWAYS_RESTART", options: null });
    assert.deepEqual(met?.conditions[0]?.subFlow, { flowId: "f-1/Fan-1/0", runId: "r-1", status: "COMPLETED", outputs: [{ stepType: "Double", stepExecutionId: "Double-1", output: 2 }], closeReason: "" });
    assert.deepEqual([flowClosed?.status, flowClosed?.nextRunId, flowClosed?.retryAt], ["FAILED", "r-1.2", 99]);
    assert.equal(handler?.kind, "TIMEOUT_HANDLER_STARTED");

    fake.answers.set("GetFlowState", () => ({
      flow: description({ parents: [{ flowId: "p", runId: "pr", stepExecutionId: "Fan-2", conditionIndex: 1 }] }),
      active: [
        {
          stepExecutionId: "Fan-1",
          stepType: "Fan",
          phase: "PHASE_WAITING",
          method: "EXECUTE",
          taskState: "TASK_STATE_UNSPECIFIED",
          conditions: [{ condition: { subFlow: { flowType: "Child" } }, childFlowId: "f-1/Fan-1/0", childRunId: "r-1" }],
        },
      ],
      workers: [],
    }));
    const state = await client.getFlowState("f-1");
    assert.deepEqual(state.flow.parents, [{ flowId: "p", runId: "pr", stepExecutionId: "Fan-2", conditionIndex: 1 }]);
    assert.deepEqual([state.active[0]?.conditions[0]?.condition.kind, state.active[0]?.conditions[0]?.childFlowId, state.active[0]?.conditions[0]?.childRunId], ["subFlow", "f-1/Fan-1/0", "r-1"]);
  });
});
