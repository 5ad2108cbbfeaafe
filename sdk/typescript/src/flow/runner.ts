// The task runner: one FlowTask (an attempt of a Step's waitFor or execute,
// an RPC, or the Flow's timeout handler) run with its Flow, answered as a
// FlowTaskResult.
import type { WireFlowTask, WireFlowTaskResult, WireStepMovement } from "../proto";
import { DexError } from "../errors";
import { AttributeStore } from "./attributes";
import { FLOW_LIMITS } from "./checks";
import { fromPayload, toPayload, type Codec } from "./codec";
import { StepContext, type TaskContext } from "./context";
import { decisionToWire, goToMulti, StepDecision } from "./decisions";
import type { Flow, Step } from "./model";
import { RpcContext } from "./rpc";
import { checkSubFlowIds } from "./subflows";
import { describeError, TaskError } from "./task-error";
import { TimeoutContext } from "./timeout-handler";
import { Wait } from "./waits";

function typeName(x: unknown): string {
  if (x === null) return "null";
  if (typeof x === "object") return `a ${(x as object).constructor?.name ?? "object"}`;
  return typeof x === "undefined" ? "undefined" : `a ${typeof x}`;
}

/** The result of waitFor: its wait (every Channel in it declared) and the locals it left. */
async function runWaitFor(flow: Flow, step: Step, ctx: StepContext<unknown>, from: string): Promise<WireFlowTaskResult> {
  if (typeof step.waitFor !== "function") {
    throw new TaskError(`Step '${ctx.stepType}' has no waitFor in this Worker`, { nonRetryable: true });
  }
  const wait = await step.waitFor(ctx);
  if (!(wait instanceof Wait)) {
    throw new TaskError(`waitFor of Step '${ctx.stepType}' returned ${typeName(wait)}, not a Wait`, { nonRetryable: true });
  }
  for (const c of wait.spec.conditions) {
    if (c.channel !== undefined && c.channel !== null) flow.checkChannel(c.channel.channel, c.channel.instanceKey, from, "waits on");
  }
  checkSubFlowIds(wait.spec.conditions, ctx.flowId, ctx.stepExecutionId);
  const result: WireFlowTaskResult = { taskId: ctx.taskId, wait: wait.spec };
  if (Object.keys(ctx.locals).length > 0) result.locals = toPayload(ctx.locals, `the locals of ${from}`);
  return result;
}

/** The result of execute: its decision, checked against the Flow. */
async function runExecute(flow: Flow, step: Step, ctx: StepContext<unknown>, from: string): Promise<WireFlowTaskResult> {
  const decision = await step.execute(ctx);
  if (!(decision instanceof StepDecision)) {
    throw new TaskError(
      `execute of Step '${ctx.stepType}' returned ${typeName(decision)}, not a StepDecision (goTo, gracefulComplete, ...)`,
      { nonRetryable: true },
    );
  }
  flow.checkDecision(decision, from);
  return { taskId: ctx.taskId, decision: decisionToWire(decision) };
}

/** The result of an RPC handler: its output (its codec) and new Steps, each declared. */
async function runRpc(flow: Flow, task: WireFlowTask, signal: AbortSignal, heartbeat: () => boolean): Promise<[TaskContext, WireFlowTaskResult]> {
  const rpc = flow.rpc(task.rpcName);
  if (rpc === undefined) {
    throw new TaskError(`Flow type '${flow.type}' in this Worker has no RPC '${task.rpcName}'`, { nonRetryable: true });
  }
  const who = `RPC '${rpc.name}'`;
  let input: unknown;
  try {
    input = fromPayload(task.input, rpc.inputCodec as Codec<unknown>);
  } catch (error) {
    throw new TaskError(`the input of ${who} cannot be decoded: ${describeError(error)}`, { nonRetryable: true });
  }
  const attributes = new AttributeStore(flow.attributes, new Set(flow.attributeReads(rpc.name, true)), task.attributes, who);
  const ctx = new RpcContext<unknown>(task, input, signal, heartbeat, attributes);
  const returned: unknown = await rpc.handler(ctx, input);
  if (returned !== undefined && (typeof returned !== "object" || returned === null || Array.isArray(returned))) {
    throw new TaskError(`the handler of ${who} returned ${typeName(returned)}, not { output, nextSteps }`, { nonRetryable: true });
  }
  const { output, nextSteps } = (returned ?? {}) as { output?: unknown; nextSteps?: unknown };
  let movements: WireStepMovement[] = [];
  if (nextSteps !== undefined) {
    if (!Array.isArray(nextSteps)) throw new TaskError(`the nextSteps of ${who} must be an array of StepMovements`, { nonRetryable: true });
    if (nextSteps.length > 0) {
      const decision = goToMulti(...nextSteps);
      flow.checkMovements(decision, who);
      movements = decisionToWire(decision).goTo?.movements ?? [];
    }
  }
  const outputPayload =
    output === undefined ? { data: Buffer.alloc(0) } : toPayload(output, `the output of ${who}`, rpc.outputCodec as Codec<unknown>);
  return [ctx, { taskId: task.taskId, rpc: { output: outputPayload, nextSteps: movements } }];
}

/** The result of the timeout handler: its decision, checked against the Flow. */
async function runTimeoutHandler(
  flow: Flow,
  task: WireFlowTask,
  signal: AbortSignal,
  heartbeat: () => boolean,
): Promise<[TaskContext, WireFlowTaskResult]> {
  const who = `the timeout handler of Flow '${flow.type}'`;
  const handler = flow.timeoutHandler;
  if (handler === undefined) throw new TaskError(`Flow type '${flow.type}' in this Worker has no timeout handler`, { nonRetryable: true });
  let input: unknown;
  try {
    input = fromPayload(task.input);
  } catch (error) {
    throw new TaskError(`the input of ${who} is not valid JSON: ${describeError(error)}`, { nonRetryable: true });
  }
  const attributes = new AttributeStore(flow.attributes, new Set(flow.attributeReads("", "timeout")), task.attributes, who);
  const ctx = new TimeoutContext<unknown>(task, input, signal, heartbeat, attributes);
  const decision = await handler(ctx);
  if (!(decision instanceof StepDecision)) {
    throw new TaskError(`${who} returned ${typeName(decision)}, not a StepDecision (forceFail, forceComplete, goTo, ...)`, {
      nonRetryable: true,
    });
  }
  flow.checkDecision(decision, "timeout", who);
  return [ctx, { taskId: task.taskId, decision: decisionToWire(decision) }];
}

/** Adds the task's publishes to `result`: each to a declared Channel, within the per-result limit. */
function addPublishes(flow: Flow, ctx: TaskContext, from: string, who: string, result: WireFlowTaskResult): void {
  const publishes = ctx.publishes();
  let count = 0;
  for (const p of publishes) {
    flow.checkChannel(p.channel, p.instanceKey, from, "publishes to", who);
    count += p.messages.length;
  }
  if (count > FLOW_LIMITS.messagesPerPublish) {
    throw new TaskError(`${from} published ${count} messages; the limit is ${FLOW_LIMITS.messagesPerPublish} per result`, {
      nonRetryable: true,
    });
  }
  if (publishes.length > 0) result.publishes = publishes;
}

/** Adds the task's Attribute writes, in the order it made them. */
function addAttributeWrites(ctx: TaskContext, result: WireFlowTaskResult): void {
  const writes = ctx.attributeStore.writes();
  if (writes.length > 0) result.attributeWrites = writes;
}

/** A thrown error as the result's error: TaskError's nonRetryable kept, a builder's refusal non-retryable. */
function errorResult(taskId: string, error: unknown): WireFlowTaskResult {
  if (error instanceof TaskError) {
    const wire: { message: string; nonRetryable: boolean; retryAfterMs?: number } = { message: error.message, nonRetryable: error.nonRetryable };
    if (error.retryAfterMs !== undefined && error.retryAfterMs > 0) wire.retryAfterMs = error.retryAfterMs;
    return { taskId, error: wire };
  }
  if (error instanceof DexError && error.code === "INVALID_ARGUMENT") {
    // A builder refused its arguments (a wait without conditions, ...): the same every time.
    return { taskId, error: { message: error.details, nonRetryable: true } };
  }
  return { taskId, error: { message: describeError(error), nonRetryable: false } };
}

/**
 * Runs one FlowTask with `flow`: the Step's waitFor or execute (or the RPC's
 * handler, or the timeout handler), its result, locals, publishes and
 * Attribute writes as a FlowTaskResult. Never throws: a failure is the result's error (TaskError's
 * nonRetryable carried over; a bad wait or decision, or an undeclared Step,
 * Channel or Attribute, is non-retryable).
 */
export async function runFlowTask(
  flow: Flow,
  task: WireFlowTask,
  signal: AbortSignal,
  heartbeat: () => boolean,
): Promise<WireFlowTaskResult> {
  try {
    if (task.method === "RPC") {
      const [ctx, result] = await runRpc(flow, task, signal, heartbeat);
      const who = `RPC '${task.rpcName}'`;
      addPublishes(flow, ctx, task.rpcName, who, result);
      addAttributeWrites(ctx, result);
      return result;
    }
    if (task.method === "ON_TIMEOUT") {
      const [ctx, result] = await runTimeoutHandler(flow, task, signal, heartbeat);
      addPublishes(flow, ctx, "timeout", `the timeout handler of Flow '${flow.type}'`, result);
      addAttributeWrites(ctx, result);
      return result;
    }
    const step = flow.step(task.stepType);
    if (step === undefined) {
      throw new TaskError(`Flow type '${flow.type}' in this Worker has no Step type '${task.stepType}'`);
    }
    let input: unknown;
    try {
      input = fromPayload(task.input);
    } catch (error) {
      throw new TaskError(`the Step input is not valid JSON: ${describeError(error)}`, { nonRetryable: true });
    }
    const from = task.stepExecutionId || task.stepType;
    const attributes = new AttributeStore(flow.attributes, new Set(flow.attributeReads(step.type)), task.attributes, `Step '${from}'`);
    const ctx = new StepContext<unknown>(task, input, signal, heartbeat, attributes);
    const run = task.method === "WAIT_FOR" ? runWaitFor : runExecute;
    const result = await run(flow, step, ctx, from);
    addPublishes(flow, ctx, from, `Step '${from}'`, result);
    addAttributeWrites(ctx, result);
    return result;
  } catch (error) {
    return errorResult(task.taskId, error);
  }
}
