// SubFlows: a wait's condition that starts a child Flow and is met when the
// child closes (docs/flow-rules.md, "SubFlows"), and what execute learns of
// the child. The child's IDs are derived by the server: Flow ID
// "<parent flow id>/<step execution id>/<condition index>", run ID the
// parent's run ID, so a repeat of the wait never starts a second child.
import { toRunStatus, type RunStatus } from "../flow-types";
import type { WireConditionResult, WireSubFlowCondition } from "../proto";
import { checkName, FLOW_LIMITS, invalid, valueLimitText } from "./checks";
import { jsonCodec, type Codec } from "./codec";
import type { StepContext } from "./context";
import { enumToWire, runStartOptionsToWire, type RunStartOptions } from "./start-options";
import { describeError, TaskError } from "./task-error";
import { Condition } from "./waits";

/**
 * What happens when the child's derived Flow ID already has a run (a repeat
 * of the same wait always attaches): "attach" (wait for it; a closed one's
 * result at once), "restartIfPreviousExitsAbnormally" (the default: attach to
 * a running or COMPLETED run, start anew after any other end),
 * "alwaysRestart" (terminate a running run and start anew).
 */
export type SubFlowReusePolicy = "attach" | "restartIfPreviousExitsAbnormally" | "alwaysRestart";

const REUSE_POLICIES: Record<SubFlowReusePolicy, string> = {
  attach: "SUB_FLOW_ATTACH",
  restartIfPreviousExitsAbnormally: "SUB_FLOW_RESTART_IF_PREVIOUS_EXITS_ABNORMALLY",
  alwaysRestart: "SUB_FLOW_ALWAYS_RESTART",
};

/** How a child starts: the run's options (timeout, policy, delay, initial Attributes, retry, Attribute Store) and the reuse policy. */
export interface SubFlowStartOptions extends RunStartOptions {
  /** Default "restartIfPreviousExitsAbnormally". */
  reusePolicy?: SubFlowReusePolicy;
}

/** SubFlow.start's options: the condition ID and the child's start options (over the SubFlow's own). */
export interface SubFlowConditionOptions extends SubFlowStartOptions {
  /** The condition ID (required in Wait.anyCombinationOf). */
  id?: string;
}

export interface SubFlowDefinition<I, O> {
  /** How the input becomes bytes. Default: JSON (as a Step input: a child of this SDK reads JSON). */
  inputCodec?: Codec<I>;
  /** How the child's outputs are read back. Default: JSON. */
  outputCodec?: Codec<O>;
  /** Start options of every child started through this SubFlow; start()'s options override them field by field. */
  options?: SubFlowStartOptions;
}

/** One output of the child's result. */
export interface SubFlowOutput<O = unknown> {
  stepType: string;
  stepExecutionId: string;
  /** Decoded (JSON unless the SubFlow has an outputCodec). */
  output: O;
  /** The bytes as stored. */
  payload: Uint8Array;
}

/** The child of a SubFlow condition as the wait saw it when it was met. */
export interface SubFlowResult<O = unknown> {
  /** The condition's position in the wait, and its ID ("" when it has none). */
  conditionIndex: number;
  conditionId: string;
  /** The child's Flow type. */
  flowType: string;
  /** The derived Flow ID. */
  flowId: string;
  /** Its latest run (after Flow retries: the last). */
  runId: string;
  /** How it closed, or "RUNNING": another condition won an AnyOf and the child keeps running. */
  status: RunStatus;
  /** The child closed (whatever its status). */
  closed: boolean;
  /** This condition is part of what met the wait. */
  fired: boolean;
  /** The child's result: every Step output that completed it, in order. */
  outputs: SubFlowOutput<O>[];
  /** outputs[0]?.output: the result of a child that one Step completed. */
  output: O | undefined;
  /** FAILED, CANCELED, TERMINATED, TIMED_OUT: why. */
  closeReason: string;
}

/** The Flow ID the server derives for the child of condition `index` of an execution's wait. */
export function subFlowId(parentFlowId: string, stepExecutionId: string, index: number): string {
  return `${parentFlowId}/${stepExecutionId}/${index}`;
}

/** Throws a TaskError (non-retryable) when a SubFlow condition's derived Flow ID would pass the name limit. */
export function checkSubFlowIds(conditions: readonly { subFlow?: unknown }[], flowId: string, stepExecutionId: string): void {
  conditions.forEach((c, i) => {
    if (c.subFlow === undefined || c.subFlow === null) return;
    const id = subFlowId(flowId, stepExecutionId, i);
    if (Buffer.byteLength(id, "utf8") > FLOW_LIMITS.nameBytes) {
      throw new TaskError(
        `condition ${i} (SubFlow) of Step '${stepExecutionId}' would start the child '${id.slice(0, 60)}...', ` +
          `a Flow ID longer than ${FLOW_LIMITS.nameBytes} bytes (the parent's Flow ID is too long for SubFlows)`,
        { nonRetryable: true },
      );
    }
  });
}

type Decode<O> = (data: Uint8Array, what: string) => O;

/** A wire ConditionResult of a SubFlow condition as a SubFlowResult, its outputs decoded with `decode`. */
export function toSubFlowResult<O>(
  c: WireConditionResult,
  parentFlowId: string,
  stepExecutionId: string,
  decode: Decode<O>,
): SubFlowResult<O> {
  const r = c.subFlow ?? null;
  const where = `the SubFlow of condition ${c.conditionId === "" ? c.index : `'${c.conditionId}'`}`;
  const outputs = (r?.outputs ?? []).map((o) => {
    const payload = o.output?.data ?? Buffer.alloc(0);
    return {
      stepType: o.stepType,
      stepExecutionId: o.stepExecutionId,
      output: decode(payload, `the output of ${o.stepExecutionId} of ${where}`),
      payload,
    };
  });
  const status = r === null ? "UNSPECIFIED" : toRunStatus(r.status);
  return {
    conditionIndex: c.index,
    conditionId: c.conditionId,
    flowType: c.condition?.subFlow?.flowType ?? "",
    // Absent only when the wait was not met by the rules (WaitFor failed and execute runs anyway).
    flowId: r?.flowId || subFlowId(parentFlowId, stepExecutionId, c.index),
    runId: r?.runId ?? "",
    status,
    closed: status !== "RUNNING" && status !== "UNSPECIFIED",
    fired: c.fired,
    outputs,
    output: outputs[0]?.output,
    closeReason: r?.closeReason ?? "",
  };
}

/** JSON as Client answers decode it: empty is null, bytes that are not JSON stay a Buffer. */
export const lenientJson: Decode<unknown> = (data) => {
  if (data.length === 0) return null;
  const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  try {
    return JSON.parse(buffer.toString("utf8")) as unknown;
  } catch {
    return buffer;
  }
};

/** The SubFlow conditions of `ctx`'s wait (of `flowType` when given), picked by ID or index; `what` names the caller. */
function pick(ctx: StepContext<unknown>, condition: string | number | undefined, flowType: string | undefined, what: string): WireConditionResult {
  const all = ctx.wireConditions().filter((c) => c.condition?.subFlow !== undefined && c.condition?.subFlow !== null);
  const mine = flowType === undefined ? all : all.filter((c) => c.condition?.subFlow?.flowType === flowType);
  const whose = flowType === undefined ? "" : ` of Flow type '${flowType}'`;
  if (condition === undefined) {
    if (mine.length === 1) return mine[0] as WireConditionResult;
    throw invalid(
      mine.length === 0
        ? `${what}: the wait of ${ctx.stepExecutionId} has no SubFlow condition${whose}`
        : `${what}: the wait of ${ctx.stepExecutionId} has ${mine.length} SubFlow conditions${whose}; name one by its ID or index`,
    );
  }
  const found = mine.find((c) => (typeof condition === "number" ? c.index === condition : c.conditionId === condition));
  if (found === undefined) {
    const ids = mine.map((c) => (c.conditionId === "" ? String(c.index) : `'${c.conditionId}'`)).join(", ") || "none";
    throw invalid(`${what}: condition ${JSON.stringify(condition)} is not a SubFlow condition${whose} of the wait of ${ctx.stepExecutionId} (its SubFlows: ${ids})`);
  }
  return found;
}

/** The JSON result of a SubFlow condition of `ctx`'s wait (StepContext.subFlow). */
export function subFlowResultIn(ctx: StepContext<unknown>, condition: string | number | undefined): SubFlowResult<unknown> {
  return toSubFlowResult(pick(ctx, condition, undefined, "ctx.subFlow"), ctx.flowId, ctx.stepExecutionId, lenientJson);
}

/**
 * A child Flow type for SubFlow conditions, with the codecs of its input and
 * outputs: `start(input)` in waitFor, `result(ctx)` in execute.
 *
 *   const quote = new SubFlow<QuoteRequest, Quote>(quoteFlow, { options: { flowTimeoutMs: 60_000 } });
 *   waitFor: () => Wait.allOf(quote.start({ vendor: "a" }, { id: "a" }), quote.start({ vendor: "b" }, { id: "b" }))
 *   execute: (ctx) => gracefulComplete(Math.min(quote.result(ctx, "a").output!.price, quote.result(ctx, "b").output!.price))
 */
export class SubFlow<I = unknown, O = unknown> {
  readonly flowType: string;
  readonly inputCodec: Codec<I>;
  readonly outputCodec: Codec<O>;
  readonly options: SubFlowStartOptions;
  /** Whether the child declares a timeout handler; undefined when given a type name. */
  readonly hasTimeoutHandler: boolean | undefined;

  /** `flow`: the child Flow (hosted by some Worker), or its type's name. Throws a DexError (INVALID_ARGUMENT) naming what is wrong. */
  constructor(flow: { readonly type: string; readonly hasTimeoutHandler?: boolean } | string, definition: SubFlowDefinition<I, O> = {}) {
    if (typeof flow === "string") {
      this.flowType = checkName(flow, "a SubFlow's Flow type");
      this.hasTimeoutHandler = undefined;
    } else if (typeof flow === "object" && flow !== null && typeof flow.type === "string") {
      this.flowType = checkName(flow.type, "a SubFlow's Flow type");
      this.hasTimeoutHandler = flow.hasTimeoutHandler === true;
    } else {
      throw invalid("a SubFlow needs a Flow or the name of a Flow type");
    }
    if (typeof definition !== "object" || definition === null) throw invalid(`SubFlow '${this.flowType}': the definition must be an object`);
    this.inputCodec = definition.inputCodec ?? (jsonCodec as Codec<I>);
    this.outputCodec = definition.outputCodec ?? (jsonCodec as Codec<O>);
    this.options = { ...(definition.options ?? {}) };
    this.wireOptions(this.options, `SubFlow '${this.flowType}': options`); // checked now, not at the first start
  }

  /** The options as the wire's StartOptions and reuse policy. */
  private wireOptions(o: SubFlowConditionOptions, what: string): Pick<WireSubFlowCondition, "options" | "reusePolicy"> {
    const { id: _id, reusePolicy, ...run } = o;
    const out: Pick<WireSubFlowCondition, "options" | "reusePolicy"> = {
      options: runStartOptionsToWire(run, what, this.hasTimeoutHandler),
    };
    if (reusePolicy !== undefined) out.reusePolicy = enumToWire(reusePolicy, REUSE_POLICIES, `${what}: reusePolicy`);
    return out;
  }

  /**
   * A condition that starts a child with `input` when the wait is recorded
   * and is met when the child closes (any status). `options` override the
   * SubFlow's own, field by field (retryPolicy as a whole).
   */
  start(input: I, options: SubFlowConditionOptions = {}): Condition {
    const what = `SubFlow '${this.flowType}'.start`;
    if (typeof options !== "object" || options === null) throw invalid(`${what}: options must be an object`);
    let data: Uint8Array;
    try {
      data = this.inputCodec.encode(input);
    } catch (error) {
      throw invalid(`${what}: the input cannot be encoded: ${describeError(error)}`);
    }
    if (data.length > FLOW_LIMITS.valueBytes) {
      throw invalid(`${what}: the input is ${data.length} bytes encoded; the limit is ${FLOW_LIMITS.valueBytes} bytes (${valueLimitText()})`);
    }
    const subFlow: WireSubFlowCondition = {
      flowType: this.flowType,
      input: { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength) },
      ...this.wireOptions({ ...this.options, ...options }, what),
    };
    return Condition.of({ conditionId: "", subFlow }, options.id);
  }

  /**
   * execute: the child of a SubFlow condition of this Flow type, by condition
   * ID or index (none: the only one), its outputs decoded with the output
   * codec. Throws when the wait has no such condition, or an output cannot
   * be decoded (the attempt fails non-retryably).
   */
  result(ctx: StepContext<any>, condition?: string | number): SubFlowResult<O> {
    const c = pick(ctx, condition, this.flowType, `SubFlow '${this.flowType}'.result`);
    return toSubFlowResult(c, ctx.flowId, ctx.stepExecutionId, (data, what) => {
      try {
        return this.outputCodec.decode(data);
      } catch (error) {
        throw new TaskError(`${what} cannot be decoded: ${describeError(error)}`, { nonRetryable: true });
      }
    });
  }

  /** execute: every SubFlow condition of this Flow type, in the wait's order. */
  results(ctx: StepContext<any>): SubFlowResult<O>[] {
    return ctx
      .wireConditions()
      .filter((c) => c.condition?.subFlow?.flowType === this.flowType)
      .map((c) => this.result(ctx, c.index));
  }
}
