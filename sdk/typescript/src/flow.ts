// The dex programming model in TypeScript (docs/flow-rules.md; the C++ twin is
// src/sdk/flow.h): a Flow lists its Steps and its persistence schema (Channels
// and ChannelMaps); a Step has an optional waitFor, which returns a Wait over
// Timers and Channel conditions, and an execute, which returns a StepDecision.
// A Worker hosts Flows (worker.ts: Worker.host); a Client starts and talks to
// their runs (client.ts).
//
//   const approval = new Channel<{ seller: string }>("seller-approval");
//   class Ship implements Step<Order> {
//     readonly type = "Ship";
//     waitFor() { return Wait.anyOf(approval.forOne(), Timer.after(86_400_000)); }
//     execute(ctx: StepContext<Order>) {
//       if (ctx.timerFired()) return goTo(this, ctx.input);
//       return gracefulComplete({ approvedBy: ctx.messages(approval)[0] });
//     }
//   }
//   const orders = new Flow({ type: "OrderProcessing", startStep: "Charge",
//                             steps: [new Charge(), new Ship()], channels: [approval] });
//
// Values (inputs, outputs, locals) are JSON; Channel messages use the
// Channel's codec (JSON unless it was given another). On the wire they are
// Payloads: bytes, empty for null.
import type {
  WireChannelRef,
  WireCondition,
  WireConditionResult,
  WireFlowDeclaration,
  WireFlowTask,
  WireFlowTaskResult,
  WireMethodOptions,
  WirePayload,
  WirePublish,
  WireStepDecision,
  WireStepMovement,
  WireStepOptions,
  WireWait,
} from "./proto";
import { DexError } from "./errors";

// ------------------------------------------------------------------ limits

/** docs/api.md, "Flows": the server refuses more with INVALID_ARGUMENT. */
export const FLOW_LIMITS = {
  /** Bytes of one input, output, Channel message or locals. */
  valueBytes: 1 << 20,
  /** Messages in one publish call or one task result. */
  messagesPerPublish: 1_000,
  /** Bytes of a name: Flow ID and type, Step type, Channel, instance key, condition ID, request ID. */
  nameBytes: 255,
  conditionsPerWait: 100,
  movementsPerDecision: 1_000,
  /** Ten years, the longest duration the server takes. */
  maxDurationMs: 10 * 366 * 24 * 3600 * 1000,
} as const;

function invalid(message: string): DexError {
  return new DexError("INVALID_ARGUMENT", message);
}

/** Throws unless `name` is a valid dex name (1..255 bytes, no control characters). */
export function checkName(name: unknown, what: string): string {
  if (typeof name !== "string" || name === "") throw invalid(`${what} must be a non-empty string`);
  if (Buffer.byteLength(name, "utf8") > FLOW_LIMITS.nameBytes) {
    throw invalid(`${what} '${name.slice(0, 40)}...' is longer than ${FLOW_LIMITS.nameBytes} bytes`);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalid(`${what} '${name}' contains a control character`);
  return name;
}

function checkDuration(ms: unknown, what: string): number {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
    throw invalid(`${what} must be a non-negative number of milliseconds, not ${String(ms)}`);
  }
  if (ms > FLOW_LIMITS.maxDurationMs) throw invalid(`${what} of ${ms} ms is longer than ten years`);
  return Math.round(ms);
}

function checkCount(n: unknown, what: string): number {
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 0xffffffff) {
    throw invalid(`${what} must be a non-negative integer, not ${String(n)}`);
  }
  return n;
}

// ------------------------------------------------------------------ codecs

/** How a Channel's messages become bytes and back. */
export interface Codec<T> {
  encode(value: T): Uint8Array;
  decode(data: Uint8Array): T;
}

const EMPTY = Buffer.alloc(0);

/** JSON text (UTF-8); null and undefined are the empty payload, which decodes to null. */
export const jsonCodec: Codec<unknown> = {
  encode(value: unknown): Uint8Array {
    if (value === undefined || value === null) return EMPTY;
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`a ${typeof value} is not JSON-serializable`);
    return Buffer.from(text, "utf8");
  },
  decode(data: Uint8Array): unknown {
    if (data.length === 0) return null;
    return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8")) as unknown;
  },
};

/** A value as a Payload, within the 1 MiB limit (`what` names it in errors). */
export function toPayload(value: unknown, what: string, codec: Codec<unknown> = jsonCodec): WirePayload {
  let data: Uint8Array;
  try {
    data = codec.encode(value);
  } catch (error) {
    throw new TaskError(`${what} cannot be encoded: ${describe(error)}`, { nonRetryable: true, cause: error });
  }
  if (data.length > FLOW_LIMITS.valueBytes) {
    throw new TaskError(
      `${what} is ${data.length} bytes encoded; the limit is ${FLOW_LIMITS.valueBytes} bytes (1 MiB)`,
      { nonRetryable: true },
    );
  }
  return { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength) };
}

/** A Payload as a value: JSON by default; empty is null. */
export function fromPayload(payload: WirePayload | null | undefined, codec: Codec<unknown> = jsonCodec): unknown {
  const data = payload?.data ?? EMPTY;
  return codec.decode(data);
}

// ------------------------------------------------------------------ errors

export interface TaskErrorOptions {
  /** No further attempt: the method's failure policy applies at once. Default false. */
  nonRetryable?: boolean;
  cause?: unknown;
}

/**
 * Thrown by waitFor or execute to fail the attempt with `message`. A
 * retryable failure consumes an attempt and the method is retried per its
 * retry policy; a non-retryable one ends the retries at once (the failure
 * policy applies: fail the Flow, proceed to Execute, or a recovery Step).
 * Anything else thrown is a retryable failure with the error's message.
 */
export class TaskError extends Error {
  readonly nonRetryable: boolean;
  constructor(message: string, options: TaskErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TaskError";
    this.nonRetryable = options.nonRetryable ?? false;
  }
}

// ------------------------------------------------------------------ conditions

/** One condition of a Wait: a Timer or a Channel condition, optionally with an ID. */
export class Condition {
  /** The condition as the wire names it. */
  readonly spec: WireCondition;
  private constructor(spec: WireCondition) {
    this.spec = spec;
  }
  /** @internal */
  static of(spec: WireCondition, id: string | undefined): Condition {
    const c = new Condition(spec);
    return id === undefined ? c : c.withId(id);
  }
  /** The condition ID (required in Wait.anyCombinationOf, optional elsewhere). */
  get id(): string {
    return this.spec.conditionId;
  }
  /** The same condition named `id`. */
  withId(id: string): Condition {
    return new Condition({ ...this.spec, conditionId: checkName(id, "a condition ID") });
  }
}

/** Durable Timers: they fire on the server, whatever happens to Workers. */
export const Timer = {
  /** Fires `ms` after the wait is recorded. */
  after(ms: number, id?: string): Condition {
    return Condition.of({ conditionId: "", timer: { durationMs: checkDuration(ms, "Timer.after") } }, id);
  },
  /** Fires at a wall-clock time (a Date or Unix milliseconds); a time already past fires at once. */
  at(when: Date | number, id?: string): Condition {
    const ms = when instanceof Date ? when.getTime() : when;
    if (typeof ms !== "number" || !Number.isFinite(ms)) throw invalid(`Timer.at needs a valid time, not ${String(when)}`);
    return Condition.of({ conditionId: "", timer: { atUnixMs: Math.round(ms) } }, id);
  },
};

export interface ChannelOptions<T> {
  /** How messages become bytes. Default: JSON. */
  codec?: Codec<T>;
}

/**
 * A durable FIFO queue of one run, declared in its Flow's `channels`. Clients
 * publish to it (Client.publishToChannel), Steps publish with ctx.publish and
 * consume with a Channel condition in waitFor.
 */
export class Channel<T = unknown> {
  readonly name: string;
  /** "" unless this is an instance of a ChannelMap. */
  readonly instanceKey: string;
  readonly codec: Codec<T>;
  /** True for ChannelMap.instance(key). */
  readonly isMapInstance: boolean;

  constructor(name: string, options: ChannelOptions<T> = {}) {
    this.name = checkName(name, "a Channel name");
    this.codec = options.codec ?? (jsonCodec as Codec<T>);
    this.instanceKey = "";
    this.isMapInstance = false;
  }

  /** @internal */
  static instanceOf<T>(map: ChannelMap<T>, key: string): Channel<T> {
    const c = new Channel<T>(map.name, { codec: map.codec });
    (c as { instanceKey: string }).instanceKey = checkName(key, `an instance key of ChannelMap '${map.name}'`);
    (c as { isMapInstance: boolean }).isMapInstance = true;
    return c;
  }

  private condition(match: string, min: number, max: number, id: string | undefined): Condition {
    return Condition.of(
      { conditionId: "", channel: { channel: this.name, instanceKey: this.instanceKey, match, min, max } },
      id,
    );
  }
  /** Met when at least one message is queued; takes one. */
  forOne(id?: string): Condition {
    return this.condition("FOR_ONE", 0, 0, id);
  }
  /** Met when at least `n` are queued; takes `n`. */
  forN(n: number, id?: string): Condition {
    if (checkCount(n, "forN(n)") < 1) throw invalid("forN(n) needs n >= 1");
    return this.condition("FOR_N", n, 0, id);
  }
  /** Met when at least `n` are queued; takes every queued message. */
  atLeast(n: number, id?: string): Condition {
    return this.condition("AT_LEAST", checkCount(n, "atLeast(n)"), 0, id);
  }
  /** Met at once, even when empty; takes up to `n`. */
  atMost(n: number, id?: string): Condition {
    if (checkCount(n, "atMost(n)") < 1) throw invalid("atMost(n) needs n >= 1");
    return this.condition("AT_MOST", 0, n, id);
  }
  /** Met when at least `min` are queued; takes up to `max`. */
  atLeastAtMost(min: number, max: number, id?: string): Condition {
    checkCount(min, "atLeastAtMost(min)");
    checkCount(max, "atLeastAtMost(max)");
    if (max < 1 || min > max) throw invalid(`atLeastAtMost(${min}, ${max}) needs 1 <= max and min <= max`);
    return this.condition("AT_LEAST_AT_MOST", min, max, id);
  }
}

/** Channels by a runtime key: one FIFO queue per instance key (declared once, by name). */
export class ChannelMap<T = unknown> {
  readonly name: string;
  readonly codec: Codec<T>;
  constructor(name: string, options: ChannelOptions<T> = {}) {
    this.name = checkName(name, "a ChannelMap name");
    this.codec = options.codec ?? (jsonCodec as Codec<T>);
  }
  /** The queue of `key`. */
  instance(key: string): Channel<T> {
    return Channel.instanceOf(this, key);
  }
}

// ------------------------------------------------------------------ waits

/** What waitFor returns: when the Step's execute may run, and what it takes. */
export class Wait {
  readonly spec: WireWait;
  private constructor(spec: WireWait) {
    this.spec = spec;
  }

  private static of(kind: string, what: string, conditions: Condition[]): Wait {
    if (conditions.length === 0) {
      throw invalid(`${what} needs at least one condition (a Timer or a Channel condition); Wait.skip() waits for nothing`);
    }
    if (conditions.length > FLOW_LIMITS.conditionsPerWait) {
      throw invalid(`${what} has ${conditions.length} conditions; the limit is ${FLOW_LIMITS.conditionsPerWait}`);
    }
    conditions.forEach((c, i) => {
      if (!(c instanceof Condition)) throw invalid(`${what}: argument ${i + 1} is not a Condition`);
    });
    const ids = conditions.map((c) => c.id).filter((id) => id !== "");
    const twice = ids.find((id, i) => ids.indexOf(id) !== i);
    if (twice !== undefined) throw invalid(`${what}: the condition ID '${twice}' is used twice`);
    return new Wait({ kind, conditions: conditions.map((c) => c.spec), combinations: [] });
  }

  /** Met when any condition is (the first met, in order, wins and alone takes messages). */
  static anyOf(...conditions: Condition[]): Wait {
    return Wait.of("ANY_OF", "Wait.anyOf", conditions);
  }
  /** Met when every condition is. */
  static allOf(...conditions: Condition[]): Wait {
    return Wait.of("ALL_OF", "Wait.allOf", conditions);
  }
  /**
   * An OR of AND groups: met when every condition of one combination is (the
   * first such combination wins). Every condition needs an ID (withId, or
   * the id argument of Timer.after, forOne, ...); combinations name them.
   */
  static anyCombinationOf(combinations: string[][], ...conditions: Condition[]): Wait {
    const w = Wait.of("ANY_COMBINATION_OF", "Wait.anyCombinationOf", conditions);
    const missing = conditions.findIndex((c) => c.id === "");
    if (missing >= 0) {
      throw invalid(
        `Wait.anyCombinationOf: condition ${missing + 1} has no ID; every condition needs one ` +
          "(condition.withId(id), or the id argument of Timer.after, channel.forOne, ...)",
      );
    }
    if (!Array.isArray(combinations) || combinations.length === 0) {
      throw invalid("Wait.anyCombinationOf needs at least one combination of condition IDs");
    }
    const known = new Set(conditions.map((c) => c.id));
    combinations.forEach((group, i) => {
      if (!Array.isArray(group) || group.length === 0) {
        throw invalid(`Wait.anyCombinationOf: combination ${i + 1} is empty`);
      }
      for (const id of group) {
        if (!known.has(id)) {
          throw invalid(
            `Wait.anyCombinationOf: combination ${i + 1} names '${id}', which is not a condition ID of this wait (${[
              ...known,
            ].join(", ")})`,
          );
        }
      }
    });
    return new Wait({ ...w.spec, combinations: combinations.map((g) => ({ conditionIds: [...g] })) });
  }
  /** No waiting: execute runs at once. */
  static skip(): Wait {
    return new Wait({ kind: "SKIP", conditions: [], combinations: [] });
  }
}

// ------------------------------------------------------------------ options

export interface RetryOptions {
  /** The first backoff. Default 1000. */
  initialIntervalMs?: number;
  /** Each later backoff is multiplied by this (>= 1). Default 2. */
  backoffCoefficient?: number;
  /** Backoffs are capped at this. Default 100 x the initial interval. */
  maximumIntervalMs?: number;
  /** Attempts in all, the first included. Default 3; 0: no limit. */
  maximumAttempts?: number;
  /** No retry starts later than this after the first attempt. Default: no limit. */
  totalDurationMs?: number;
}

export interface MethodOptions {
  /** One attempt's limit. Default 60000. */
  attemptTimeoutMs?: number;
  retry?: RetryOptions;
  /** "sync" (default): the attempt's start is durable before a Worker gets it; "async": sent while it is written. */
  durability?: "sync" | "async";
  /** The attempt must heartbeat at least this often. Default: no heartbeat needed. */
  heartbeatTimeoutMs?: number;
}

export interface WaitForOptions extends MethodOptions {
  /** Once WaitFor's retries are used up, run execute anyway (it sees ctx.waitForFailed). Default false: fail the Flow. */
  proceedToExecute?: boolean;
}

export interface ExecuteOptions extends MethodOptions {
  /** Once execute's retries are used up, start this Step with the same input (it sees ctx.recoveryError). Default: fail the Flow. */
  recoveryStep?: StepRef;
}

/** The options of a Step's two methods; unset fields take the server's defaults (docs/flow-rules.md, "Defaults"). */
export interface StepOptions {
  waitFor?: WaitForOptions;
  execute?: ExecuteOptions;
}

/** `over` on top of `base`, field by field (retry too). */
export function mergeStepOptions(base: StepOptions | undefined, over: StepOptions | undefined): StepOptions {
  const method = <M extends MethodOptions>(b: M | undefined, o: M | undefined): M | undefined => {
    if (b === undefined) return o;
    if (o === undefined) return b;
    const retry = b.retry === undefined || o.retry === undefined ? (o.retry ?? b.retry) : { ...b.retry, ...o.retry };
    return { ...b, ...o, ...(retry === undefined ? {} : { retry }) };
  };
  const out: StepOptions = {};
  const waitFor = method(base?.waitFor, over?.waitFor);
  const execute = method(base?.execute, over?.execute);
  if (waitFor !== undefined) out.waitFor = waitFor;
  if (execute !== undefined) out.execute = execute;
  return out;
}

function methodOptionsToWire(m: WaitForOptions & ExecuteOptions, what: string): WireMethodOptions {
  const wire: WireMethodOptions = {};
  if (m.attemptTimeoutMs !== undefined) wire.attemptTimeoutMs = checkDuration(m.attemptTimeoutMs, `${what}.attemptTimeoutMs`);
  if (m.heartbeatTimeoutMs !== undefined) {
    wire.heartbeatTimeoutMs = checkDuration(m.heartbeatTimeoutMs, `${what}.heartbeatTimeoutMs`);
  }
  if (m.durability !== undefined) {
    if (m.durability !== "sync" && m.durability !== "async") {
      throw invalid(`${what}.durability must be "sync" or "async", not ${String(m.durability)}`);
    }
    wire.durability = m.durability === "async" ? "ASYNC" : "SYNC";
  }
  const r = m.retry;
  if (r !== undefined) {
    const retry: WireMethodOptions["retry"] = {};
    if (r.initialIntervalMs !== undefined) retry.initialIntervalMs = checkDuration(r.initialIntervalMs, `${what}.retry.initialIntervalMs`);
    if (r.maximumIntervalMs !== undefined) retry.maximumIntervalMs = checkDuration(r.maximumIntervalMs, `${what}.retry.maximumIntervalMs`);
    if (r.totalDurationMs !== undefined) retry.totalDurationMs = checkDuration(r.totalDurationMs, `${what}.retry.totalDurationMs`);
    if (r.maximumAttempts !== undefined) retry.maximumAttempts = checkCount(r.maximumAttempts, `${what}.retry.maximumAttempts`);
    if (r.backoffCoefficient !== undefined) {
      if (!(typeof r.backoffCoefficient === "number" && r.backoffCoefficient >= 1)) {
        throw invalid(`${what}.retry.backoffCoefficient must be a number >= 1, not ${String(r.backoffCoefficient)}`);
      }
      retry.backoffCoefficient = r.backoffCoefficient;
    }
    wire.retry = retry;
  }
  if (m.proceedToExecute === true) wire.failurePolicy = "PROCEED_TO_EXECUTE";
  if (m.recoveryStep !== undefined) {
    wire.failurePolicy = "PROCEED_TO_STEP";
    wire.recoveryStepType = stepTypeOf(m.recoveryStep, `${what}.recoveryStep`);
  }
  return wire;
}

/** StepOptions as the wire's StepOptions. Throws a DexError (INVALID_ARGUMENT) naming a bad field. */
export function stepOptionsToWire(options: StepOptions, what = "StepOptions"): WireStepOptions {
  const wire: WireStepOptions = {};
  if (options.waitFor !== undefined) {
    if ((options.waitFor as ExecuteOptions).recoveryStep !== undefined) {
      throw invalid(`${what}.waitFor cannot have a recoveryStep (that is an execute option)`);
    }
    wire.waitFor = methodOptionsToWire(options.waitFor, `${what}.waitFor`);
  }
  if (options.execute !== undefined) {
    if ((options.execute as WaitForOptions).proceedToExecute !== undefined) {
      throw invalid(`${what}.execute cannot have proceedToExecute (that is a waitFor option)`);
    }
    wire.execute = methodOptionsToWire(options.execute, `${what}.execute`);
  }
  return wire;
}

// ------------------------------------------------------------------ decisions

/** A Step type by name, or the Step itself. */
export type StepRef = string | { readonly type: string };

function stepTypeOf(ref: StepRef, what: string): string {
  if (typeof ref === "string") return checkName(ref, what);
  if (typeof ref === "object" && ref !== null && typeof ref.type === "string") return checkName(ref.type, what);
  throw invalid(`${what} must be a Step type name or a Step, not ${String(ref)}`);
}

/** One new Step execution of a decision. */
export interface StepMovement<I = unknown> {
  step: StepRef;
  /** Its input (JSON). Default null. */
  input?: I;
  /** Replaces the Step's declared options for this execution only. */
  options?: StepOptions;
}

type DecisionBody =
  | { kind: "goTo"; movements: StepMovement[] }
  | { kind: "gracefulComplete"; output: unknown }
  | { kind: "forceComplete"; output: unknown }
  | { kind: "forceFail"; reason: string }
  | { kind: "deadEnd" }
  | {
      kind: "forceCompleteIfChannelsEmpty";
      channels: (Channel<unknown> | ChannelMap<unknown>)[];
      output: unknown;
      otherwise: StepMovement[];
    };

/**
 * What execute returns: where the Flow goes next (goTo, goToMulti), how it
 * ends (gracefulComplete, forceComplete, forceFail, forceCompleteIfChannelsEmpty)
 * or that this branch ends (deadEnd); with cancelSteps / cancelSiblings it
 * also cancels other active Step executions. Immutable.
 */
export class StepDecision {
  readonly body: DecisionBody;
  /** Step types whose active executions are canceled with this decision. */
  readonly cancelStepTypes: readonly string[];
  readonly cancelsSiblings: boolean;

  /** @internal */
  constructor(body: DecisionBody, cancelStepTypes: readonly string[] = [], cancelsSiblings = false) {
    this.body = body;
    this.cancelStepTypes = cancelStepTypes;
    this.cancelsSiblings = cancelsSiblings;
  }
  get kind(): DecisionBody["kind"] {
    return this.body.kind;
  }
  /** The same decision, also canceling the active executions of these Step types. */
  cancelSteps(...steps: StepRef[]): StepDecision {
    const types = steps.map((s, i) => stepTypeOf(s, `cancelSteps argument ${i + 1}`));
    return new StepDecision(this.body, [...this.cancelStepTypes, ...types], this.cancelsSiblings);
  }
  /** The same decision, also canceling the executions started by the same parent execution as this one. */
  cancelSiblings(): StepDecision {
    return new StepDecision(this.body, this.cancelStepTypes, true);
  }
}

function checkMovements(movements: StepMovement[], what: string): StepMovement[] {
  if (movements.length > FLOW_LIMITS.movementsPerDecision) {
    throw invalid(`${what} has ${movements.length} movements; the limit is ${FLOW_LIMITS.movementsPerDecision}`);
  }
  movements.forEach((m, i) => {
    if (typeof m !== "object" || m === null) throw invalid(`${what}: movement ${i + 1} is not a StepMovement`);
    stepTypeOf(m.step, `${what}: the step of movement ${i + 1}`);
    if (m.options !== undefined) stepOptionsToWire(m.options, `${what}: the options of movement ${i + 1}`);
  });
  return movements;
}

/** One new execution of `step` with `input`, optionally with other options. */
export function goTo<I = unknown>(step: StepRef, input?: I, options?: StepOptions): StepDecision {
  const m: StepMovement = { step, input };
  if (options !== undefined) m.options = options;
  return new StepDecision({ kind: "goTo", movements: checkMovements([m], "goTo") });
}

/** Several new executions at once (a fan-out), each with its input and optional options. */
export function goToMulti(...movements: StepMovement[]): StepDecision {
  if (movements.length === 0) throw invalid("goToMulti needs at least one StepMovement (deadEnd() ends a branch)");
  return new StepDecision({ kind: "goTo", movements: checkMovements(movements, "goToMulti") });
}

/** Adds `output` to the Flow's result; the Flow completes once no other Step execution is active. */
export function gracefulComplete(output?: unknown): StepDecision {
  return new StepDecision({ kind: "gracefulComplete", output: output ?? null });
}

/** Completes the Flow now with `output`, canceling every other active execution. */
export function forceComplete(output?: unknown): StepDecision {
  return new StepDecision({ kind: "forceComplete", output: output ?? null });
}

/** Fails the Flow now with `reason`, canceling every other active execution. */
export function forceFail(reason: string): StepDecision {
  if (typeof reason !== "string") throw invalid("forceFail needs a reason (a string)");
  return new StepDecision({ kind: "forceFail", reason });
}

/** This branch ends; the Flow goes on while other executions are active. */
export function deadEnd(): StepDecision {
  return new StepDecision({ kind: "deadEnd" });
}

/**
 * In one atomic check: completes the Flow with `output` when every named
 * Channel (a ChannelMap: every instance) is empty, else applies `otherwise`.
 */
export function forceCompleteIfChannelsEmpty(options: {
  channels: (Channel<any> | ChannelMap<any>)[];
  output?: unknown;
  otherwise?: StepMovement[];
}): StepDecision {
  if (!Array.isArray(options.channels) || options.channels.length === 0) {
    throw invalid("forceCompleteIfChannelsEmpty needs at least one Channel or ChannelMap");
  }
  options.channels.forEach((c, i) => {
    if (!(c instanceof Channel) && !(c instanceof ChannelMap)) {
      throw invalid(`forceCompleteIfChannelsEmpty: channel ${i + 1} is not a Channel or ChannelMap`);
    }
  });
  return new StepDecision({
    kind: "forceCompleteIfChannelsEmpty",
    channels: options.channels,
    output: options.output ?? null,
    otherwise: checkMovements(options.otherwise ?? [], "forceCompleteIfChannelsEmpty otherwise"),
  });
}

function movementToWire(m: StepMovement, what: string): WireStepMovement {
  const type = stepTypeOf(m.step, what);
  const wire: WireStepMovement = { stepType: type, input: toPayload(m.input ?? null, `the input of ${type} (${what})`) };
  if (m.options !== undefined) wire.options = stepOptionsToWire(m.options, `the options of ${type} (${what})`);
  return wire;
}

/** The decision as the wire's StepDecision. */
export function decisionToWire(decision: StepDecision): WireStepDecision {
  const wire: WireStepDecision = {
    cancelStepTypes: [...decision.cancelStepTypes],
    cancelSiblings: decision.cancelsSiblings,
  };
  const b = decision.body;
  switch (b.kind) {
    case "goTo":
      wire.goTo = { movements: b.movements.map((m, i) => movementToWire(m, `movement ${i + 1}`)) };
      break;
    case "gracefulComplete":
      wire.gracefulComplete = toPayload(b.output, "the gracefulComplete output");
      break;
    case "forceComplete":
      wire.forceComplete = toPayload(b.output, "the forceComplete output");
      break;
    case "forceFail":
      wire.forceFail = b.reason;
      break;
    case "deadEnd":
      wire.deadEnd = {};
      break;
    case "forceCompleteIfChannelsEmpty": {
      const channels: WireChannelRef[] = b.channels.map((c) =>
        c instanceof ChannelMap
          ? { channel: c.name, instanceKey: "", allInstances: true }
          : { channel: c.name, instanceKey: c.instanceKey, allInstances: false },
      );
      wire.forceCompleteIfChannelsEmpty = {
        channels,
        output: toPayload(b.output, "the forceCompleteIfChannelsEmpty output"),
        otherwise: b.otherwise.map((m, i) => movementToWire(m, `otherwise movement ${i + 1}`)),
      };
      break;
    }
  }
  return wire;
}

// ------------------------------------------------------------------ context

/** What execute learns about one condition of its Step's wait. */
export interface ConditionResult {
  /** The condition's position in the wait. */
  index: number;
  /** "" when it has none. */
  id: string;
  kind: "timer" | "channel";
  /** Part of what met the wait. */
  fired: boolean;
  /** A Timer ended early by Client.skipTimer. */
  skipped: boolean;
  /** A Channel condition: its Channel and instance key. */
  channel?: string;
  instanceKey?: string;
  /** A Channel condition: the raw messages it took, in FIFO order (ctx.messages decodes them). */
  payloads: Uint8Array[];
}

function conditionResult(c: WireConditionResult): ConditionResult {
  const cond = c.condition;
  const r: ConditionResult = {
    index: c.index,
    id: c.conditionId,
    kind: cond?.channel !== null && cond?.channel !== undefined ? "channel" : "timer",
    fired: c.fired,
    skipped: c.skipped,
    payloads: c.messages.map((m) => m.data),
  };
  if (cond?.channel !== null && cond?.channel !== undefined) {
    r.channel = cond.channel.channel;
    r.instanceKey = cond.channel.instanceKey;
  }
  return r;
}

/** The attempt's environment, given to waitFor and execute. */
export class StepContext<I = unknown> {
  readonly taskId: string;
  readonly flowId: string;
  readonly runId: string;
  readonly flowType: string;
  readonly stepType: string;
  /** "<StepType>-<n>". */
  readonly stepExecutionId: string;
  readonly method: "waitFor" | "execute";
  /** From 1. */
  readonly attempt: number;
  /** When the method's first attempt started (Unix ms). */
  readonly firstAttemptAt: number;
  /** The execution whose decision started this one ("" for the start Step). */
  readonly scheduledBy: string;
  readonly input: I;
  readonly attemptTimeoutMs: number;
  /** 0: no heartbeat needed. */
  readonly heartbeatTimeoutMs: number;
  /** execute: WaitFor failed for good and its policy proceeded to execute (recoveryError says why). */
  readonly waitForFailed: boolean;
  /** Why WaitFor failed (waitForFailed), or why the Step this recovery Step replaces failed; "" otherwise. */
  readonly recoveryError: string;
  /** execute: every condition of the wait (empty after a skip or without waitFor). */
  readonly conditions: readonly ConditionResult[];
  /**
   * Aborted when the server asks to stop (learned from a heartbeat's
   * answer), when the attempt timeout passes, or at the Worker's shutdown
   * timeout. Pass it on to fetch() and friends.
   */
  readonly signal: AbortSignal;

  private readonly localValues: Record<string, unknown>;
  private readonly publishList: WirePublish[] = [];
  private readonly beat: () => boolean;

  /** @internal */
  constructor(task: WireFlowTask, input: I, signal: AbortSignal, heartbeat: () => boolean) {
    this.taskId = task.taskId;
    this.flowId = task.flowId;
    this.runId = task.runId;
    this.flowType = task.flowType;
    this.stepType = task.stepType;
    this.stepExecutionId = task.stepExecutionId;
    this.method = task.method === "WAIT_FOR" ? "waitFor" : "execute";
    this.attempt = task.attempt;
    this.firstAttemptAt = task.firstAttemptUnixMs;
    this.scheduledBy = task.scheduledBy;
    this.input = input;
    this.attemptTimeoutMs = task.attemptTimeoutMs;
    this.heartbeatTimeoutMs = task.heartbeatTimeoutMs;
    this.waitForFailed = task.waitForFailed;
    this.recoveryError = task.recoveryError;
    this.conditions = task.conditions.map(conditionResult);
    this.signal = signal;
    this.beat = heartbeat;
    let locals: unknown = null;
    if (this.method === "execute" && task.locals !== null && task.locals.data.length > 0) {
      try {
        locals = fromPayload(task.locals);
      } catch {
        locals = null;
      }
    }
    this.localValues =
      typeof locals === "object" && locals !== null && !Array.isArray(locals) ? (locals as Record<string, unknown>) : {};
  }

  /** True once `signal` aborted. */
  get cancelled(): boolean {
    return this.signal.aborted;
  }

  /** waitFor: leaves `value` (JSON) for the same execution's execute. */
  setLocal(key: string, value: unknown): void {
    this.localValues[key] = value;
  }
  /** execute: what waitFor left under `key`; undefined when nothing. */
  getLocal<T = unknown>(key: string): T | undefined {
    return this.localValues[key] as T | undefined;
  }
  /** Every local, by key. */
  get locals(): Readonly<Record<string, unknown>> {
    return this.localValues;
  }

  /** A Timer condition met the wait (fired, or skipped by Client.skipTimer). */
  timerFired(): boolean {
    return this.conditions.some((c) => c.fired && c.kind === "timer");
  }
  /** Whether the condition with this ID (a string) or at this index (a number) met the wait. */
  fired(condition: string | number): boolean {
    const c = this.conditions.find((r) => (typeof condition === "number" ? r.index === condition : r.id === condition));
    return c?.fired ?? false;
  }
  /** The messages the wait took from `channel` (every condition on it), in FIFO order, decoded with its codec. */
  messages<T>(channel: Channel<T>): T[] {
    const out: T[] = [];
    for (const c of this.conditions) {
      if (c.kind !== "channel" || c.channel !== channel.name || c.instanceKey !== channel.instanceKey) continue;
      for (const p of c.payloads) out.push(channel.codec.decode(p));
    }
    return out;
  }

  /** Appends `messages` to `channel` when this attempt's result is accepted, with it, in order. */
  publish<T>(channel: Channel<T>, ...messages: T[]): void {
    if (!(channel instanceof Channel)) throw invalid("publish needs a Channel (ChannelMap.instance(key) for a map)");
    const payloads = messages.map((m, i) =>
      toPayload(m, `message ${i + 1} published to '${channel.name}'`, channel.codec as Codec<unknown>),
    );
    const last = this.publishList[this.publishList.length - 1];
    if (last !== undefined && last.channel === channel.name && last.instanceKey === channel.instanceKey) {
      last.messages.push(...payloads);
    } else {
      this.publishList.push({ channel: channel.name, instanceKey: channel.instanceKey, messages: payloads });
    }
  }

  /**
   * Tells the server the attempt is alive (needed with a heartbeat timeout).
   * Its answer may abort `signal`. False when it was dropped (no stream now).
   */
  heartbeat(): boolean {
    return this.beat();
  }

  /** @internal */
  publishes(): WirePublish[] {
    return this.publishList;
  }
}

// ------------------------------------------------------------------ Steps and Flows

/**
 * A Step type. Implement it with a class (`class Ship implements Step<Order>`)
 * or an object literal. Without waitFor, execute runs at once.
 */
export interface Step<I = any> {
  readonly type: string;
  readonly options?: StepOptions;
  waitFor?(ctx: StepContext<I>): Wait | Promise<Wait>;
  execute(ctx: StepContext<I>): StepDecision | Promise<StepDecision>;
}

export interface FlowDefinition {
  /** The Flow type's name. */
  type: string;
  /** The Step that a new run starts with. */
  startStep: StepRef;
  /** Every Step type the Flow may reach. */
  steps: Step<any>[];
  /** The persistence schema: the Flow's Channels and ChannelMaps. */
  channels?: (Channel<any> | ChannelMap<any>)[];
  /** Options every Step starts from; a Step's own options override them field by field. */
  defaultStepOptions?: StepOptions;
}

/** A Flow type: its Steps, its start Step and its Channels. Checked when constructed. */
export class Flow {
  readonly type: string;
  readonly startStep: string;
  readonly steps: ReadonlyMap<string, Step<any>>;
  readonly channels: readonly (Channel<any> | ChannelMap<any>)[];
  readonly defaultStepOptions: StepOptions | undefined;
  private readonly wireDeclaration: WireFlowDeclaration;

  /** Throws a DexError (INVALID_ARGUMENT) that says what is wrong with the definition. */
  constructor(definition: FlowDefinition) {
    this.type = checkName(definition.type, "the Flow type");
    const what = `Flow '${this.type}'`;
    if (!Array.isArray(definition.steps) || definition.steps.length === 0) throw invalid(`${what} needs at least one Step`);
    const steps = new Map<string, Step<any>>();
    definition.steps.forEach((s, i) => {
      if (typeof s !== "object" || s === null || typeof s.execute !== "function") {
        throw invalid(`${what}: step ${i + 1} is not a Step (it needs a type and an execute method)`);
      }
      const type = checkName(s.type, `${what}: the type of step ${i + 1}`);
      if (steps.has(type)) throw invalid(`${what} lists the Step type '${type}' twice`);
      if (s.waitFor !== undefined && typeof s.waitFor !== "function") {
        throw invalid(`${what}: waitFor of Step '${type}' is not a function`);
      }
      steps.set(type, s);
    });
    this.steps = steps;
    this.startStep = stepTypeOf(definition.startStep, `${what}: startStep`);
    if (!steps.has(this.startStep)) {
      throw invalid(`${what}: the start Step '${this.startStep}' is not one of its Steps (${[...steps.keys()].join(", ")})`);
    }
    const channels = definition.channels ?? [];
    const names = new Set<string>();
    for (const c of channels) {
      if (!(c instanceof Channel) && !(c instanceof ChannelMap)) throw invalid(`${what}: channels holds something that is not a Channel or ChannelMap`);
      if (c instanceof Channel && c.isMapInstance) {
        throw invalid(`${what}: declare the ChannelMap '${c.name}' itself, not one of its instances`);
      }
      if (names.has(c.name)) throw invalid(`${what} declares the Channel '${c.name}' twice`);
      names.add(c.name);
    }
    this.channels = [...channels];
    this.defaultStepOptions = definition.defaultStepOptions;
    const declared = [...steps.values()].map((s) => {
      const options = mergeStepOptions(this.defaultStepOptions, s.options);
      const recovery = options.execute?.recoveryStep;
      if (recovery !== undefined) {
        const r = stepTypeOf(recovery, `${what}: the recoveryStep of '${s.type}'`);
        if (!steps.has(r)) throw invalid(`${what}: the recoveryStep '${r}' of Step '${s.type}' is not one of its Steps`);
      }
      return {
        stepType: s.type,
        hasWaitFor: typeof s.waitFor === "function",
        options: stepOptionsToWire(options, `${what}: the options of Step '${s.type}'`),
      };
    });
    this.wireDeclaration = {
      flowType: this.type,
      startStepType: this.startStep,
      steps: declared,
      channels: this.channels.map((c) => ({ name: c.name, isMap: c instanceof ChannelMap })),
    };
  }

  /** What a Worker declares in its hello. */
  declaration(): WireFlowDeclaration {
    return this.wireDeclaration;
  }

  /** The Step of this type, if declared. */
  step(type: string): Step<any> | undefined {
    return this.steps.get(type);
  }

  /** Throws a TaskError (non-retryable) when the decision names a Step or Channel this Flow does not declare. */
  checkDecision(decision: StepDecision, from: string): void {
    const mustBeStep = (type: string, role: string): void => {
      if (!this.steps.has(type)) {
        throw new TaskError(
          `Step '${from}' decided ${role} '${type}', which Flow '${this.type}' does not declare ` +
            `(its Steps: ${[...this.steps.keys()].join(", ")})`,
          { nonRetryable: true },
        );
      }
    };
    const b = decision.body;
    const movements = b.kind === "goTo" ? b.movements : b.kind === "forceCompleteIfChannelsEmpty" ? b.otherwise : [];
    for (const m of movements) {
      mustBeStep(stepTypeOf(m.step, "a movement's step"), b.kind === "goTo" ? "goTo" : "otherwise goTo");
      const recovery = m.options?.execute?.recoveryStep;
      if (recovery !== undefined) mustBeStep(stepTypeOf(recovery, "recoveryStep"), "a recoveryStep");
    }
    for (const t of decision.cancelStepTypes) mustBeStep(t, "to cancel the Step type");
    if (b.kind === "forceCompleteIfChannelsEmpty") {
      for (const c of b.channels) this.checkChannel(c.name, c instanceof ChannelMap ? "map" : c.instanceKey, from, "checks");
    }
  }

  /** Throws a TaskError (non-retryable) when a wait's or publish's channel is not declared as used. */
  checkChannel(name: string, instanceKey: string, from: string, role: string): void {
    const c = this.channels.find((x) => x.name === name);
    if (c === undefined) {
      throw new TaskError(
        `Step '${from}' ${role} the Channel '${name}', which Flow '${this.type}' does not declare ` +
          `(its Channels: ${this.channels.map((x) => x.name).join(", ") || "none"})`,
        { nonRetryable: true },
      );
    }
    if (instanceKey === "map") return;
    const isMap = c instanceof ChannelMap;
    if (isMap && instanceKey === "") {
      throw new TaskError(`Step '${from}' ${role} the ChannelMap '${name}' without an instance key (use map.instance(key))`, {
        nonRetryable: true,
      });
    }
    if (!isMap && instanceKey !== "") {
      throw new TaskError(`Step '${from}' ${role} the Channel '${name}' with an instance key, but it is not a ChannelMap`, {
        nonRetryable: true,
      });
    }
  }
}

// ------------------------------------------------------------------ running a task

function describe(error: unknown): string {
  if (error instanceof Error) {
    return error.name === "Error" || error.name === "" || error.name === "TaskError"
      ? error.message
      : `${error.name}: ${error.message}`;
  }
  return String(error);
}

/**
 * Runs one FlowTask with `flow`: the Step's waitFor or execute, its result,
 * locals and publishes as a FlowTaskResult. Never throws: a failure is the
 * result's error (TaskError's nonRetryable carried over; a bad wait or
 * decision, or an undeclared Step or Channel, is non-retryable).
 */
export async function runFlowTask(
  flow: Flow,
  task: WireFlowTask,
  signal: AbortSignal,
  heartbeat: () => boolean,
): Promise<WireFlowTaskResult> {
  const taskId = task.taskId;
  try {
    const step = flow.step(task.stepType);
    if (step === undefined) {
      throw new TaskError(`Flow type '${flow.type}' in this Worker has no Step type '${task.stepType}'`);
    }
    let input: unknown;
    try {
      input = fromPayload(task.input);
    } catch (error) {
      throw new TaskError(`the Step input is not valid JSON: ${describe(error)}`, { nonRetryable: true });
    }
    const ctx = new StepContext<unknown>(task, input, signal, heartbeat);
    const from = task.stepExecutionId || task.stepType;
    const result: WireFlowTaskResult = { taskId };
    if (task.method === "WAIT_FOR") {
      if (typeof step.waitFor !== "function") {
        throw new TaskError(`Step '${task.stepType}' has no waitFor in this Worker`, { nonRetryable: true });
      }
      const wait = await step.waitFor(ctx);
      if (!(wait instanceof Wait)) {
        throw new TaskError(`waitFor of Step '${task.stepType}' returned ${typeName(wait)}, not a Wait`, { nonRetryable: true });
      }
      for (const c of wait.spec.conditions) {
        if (c.channel !== undefined && c.channel !== null) flow.checkChannel(c.channel.channel, c.channel.instanceKey, from, "waits on");
      }
      result.wait = wait.spec;
      const locals = ctx.locals;
      if (Object.keys(locals).length > 0) result.locals = toPayload(locals, `the locals of ${from}`);
    } else {
      const decision = await step.execute(ctx);
      if (!(decision instanceof StepDecision)) {
        throw new TaskError(
          `execute of Step '${task.stepType}' returned ${typeName(decision)}, not a StepDecision (goTo, gracefulComplete, ...)`,
          { nonRetryable: true },
        );
      }
      flow.checkDecision(decision, from);
      result.decision = decisionToWire(decision);
    }
    const publishes = ctx.publishes();
    let count = 0;
    for (const p of publishes) {
      flow.checkChannel(p.channel, p.instanceKey, from, "publishes to");
      count += p.messages.length;
    }
    if (count > FLOW_LIMITS.messagesPerPublish) {
      throw new TaskError(`${from} published ${count} messages; the limit is ${FLOW_LIMITS.messagesPerPublish} per result`, {
        nonRetryable: true,
      });
    }
    if (publishes.length > 0) result.publishes = publishes;
    return result;
  } catch (error) {
    if (error instanceof TaskError) return { taskId, error: { message: error.message, nonRetryable: error.nonRetryable } };
    if (error instanceof DexError && error.code === "INVALID_ARGUMENT") {
      // A builder refused its arguments (a wait without conditions, ...): the same every time.
      return { taskId, error: { message: error.details, nonRetryable: true } };
    }
    return { taskId, error: { message: describe(error), nonRetryable: false } };
  }
}

function typeName(x: unknown): string {
  if (x === null) return "null";
  if (typeof x === "object") return `a ${(x as object).constructor?.name ?? "object"}`;
  return typeof x === "undefined" ? "undefined" : `a ${typeof x}`;
}
