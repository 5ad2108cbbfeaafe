// StepContext: what one attempt of waitFor or execute sees (the task, what
// met the wait, the children of its SubFlows, the locals, the Attributes it
// reads) and does (publish, write Attributes, heartbeat). TaskContext is what
// it shares with an RPC handler's RpcContext (rpc.ts) and a timeout handler's
// TimeoutContext.
import type { WireConditionResult, WireFlowTask, WirePublish } from "../proto";
import { AttributeStore, type AttributeScope } from "./attributes";
import { Channel, ChannelMap } from "./channels";
import { invalid } from "./checks";
import { fromPayload, toPayload, type Codec } from "./codec";
import { TaskError } from "./task-error";
import { lenientJson, subFlowResultIn, toSubFlowResult, type SubFlowResult } from "./subflows";

/** What execute learns about one condition of its Step's wait. */
export interface ConditionResult {
  /** The condition's position in the wait. */
  index: number;
  /** "" when it has none. */
  id: string;
  kind: "timer" | "channel" | "subFlow";
  /** Part of what met the wait. */
  fired: boolean;
  /** A Timer ended early by Client.skipTimer. */
  skipped: boolean;
  /** A Channel condition: its Channel and instance key. */
  channel?: string;
  instanceKey?: string;
  /** A Channel condition: the raw messages it took, in FIFO order (ctx.messages decodes them). */
  payloads: Uint8Array[];
  /** A SubFlow condition: its child (outputs as JSON; SubFlow.result decodes with a codec). */
  subFlow?: SubFlowResult<unknown>;
}

function conditionKind(c: WireConditionResult["condition"]): ConditionResult["kind"] {
  if (c?.channel !== null && c?.channel !== undefined) return "channel";
  if (c?.subFlow !== null && c?.subFlow !== undefined) return "subFlow";
  return "timer";
}

function conditionResult(c: WireConditionResult, task: WireFlowTask): ConditionResult {
  const cond = c.condition;
  const r: ConditionResult = {
    index: c.index,
    id: c.conditionId,
    kind: conditionKind(cond),
    fired: c.fired,
    skipped: c.skipped,
    payloads: c.messages.map((m) => m.data),
  };
  if (cond?.channel !== null && cond?.channel !== undefined) {
    r.channel = cond.channel.channel;
    r.instanceKey = cond.channel.instanceKey;
  }
  if (r.kind === "subFlow") r.subFlow = toSubFlowResult(c, task.flowId, task.stepExecutionId, lenientJson);
  return r;
}

/** What waitFor left for execute: an object, or {} when there is nothing readable. */
function localsOf(task: WireFlowTask): Record<string, unknown> {
  if (task.method === "WAIT_FOR" || task.locals === null || task.locals.data.length === 0) return {};
  let locals: unknown = null;
  try {
    locals = fromPayload(task.locals);
  } catch {
    locals = null;
  }
  return typeof locals === "object" && locals !== null && !Array.isArray(locals) ? (locals as Record<string, unknown>) : {};
}

/** What every task of a run sees and does: Step attempts and RPC handlers. */
export class TaskContext implements AttributeScope {
  readonly taskId: string;
  readonly flowId: string;
  readonly runId: string;
  readonly flowType: string;
  /** The run's Flow retry attempt: 1 for the Flow ID's first run, n for its (n-1)th retry (0: the server does not say). */
  readonly flowAttempt: number;
  /** 0: no heartbeat needed. */
  readonly heartbeatTimeoutMs: number;
  /**
   * Aborted when the server asks to stop (learned from a heartbeat's
   * answer), when the attempt timeout passes, or at the Worker's shutdown
   * timeout. Pass it on to fetch() and friends.
   */
  readonly signal: AbortSignal;
  /** @internal The Attributes the task reads and writes (Attribute.get/set/remove). */
  readonly attributeStore: AttributeStore;

  private readonly publishList: WirePublish[] = [];
  private readonly beat: () => boolean;
  private readonly sizes: NonNullable<WireFlowTask["channelSizes"]>;
  private readonly sizesTruncated: boolean;

  /** @internal */
  constructor(task: WireFlowTask, signal: AbortSignal, heartbeat: () => boolean, attributes: AttributeStore) {
    this.taskId = task.taskId;
    this.flowId = task.flowId;
    this.runId = task.runId;
    this.flowType = task.flowType;
    this.flowAttempt = task.flowAttempt ?? 0;
    this.heartbeatTimeoutMs = task.heartbeatTimeoutMs;
    this.signal = signal;
    this.beat = heartbeat;
    this.attributeStore = attributes;
    this.sizes = task.channelSizes ?? [];
    this.sizesTruncated = task.channelSizesTruncated ?? false;
  }

  /**
   * How many messages wait in `channel` (a Channel, or ChannelMap.instance(key))
   * as the task was handed out, plus those this task published. A snapshot:
   * messages may arrive, or other Steps' waits take them, since.
   */
  channelSize(channel: Channel<unknown>): number {
    if (!(channel instanceof Channel)) throw invalid("channelSize needs a Channel (ChannelMap.instance(key) for a map)");
    return this.queueSizes(channel.name).get(channel.instanceKey) ?? 0;
  }

  /** How many instances of `map` hold messages (as channelSize counts them). */
  channelMapSize(map: ChannelMap<unknown>): number {
    if (!(map instanceof ChannelMap)) throw invalid("channelMapSize needs a ChannelMap");
    return this.queueSizes(map.name).size;
  }

  /** The instance keys of `map` holding messages, sorted (as channelSize counts them). */
  channelInstanceKeys(map: ChannelMap<unknown>): string[] {
    if (!(map instanceof ChannelMap)) throw invalid("channelInstanceKeys needs a ChannelMap");
    return [...this.queueSizes(map.name).keys()].sort();
  }

  private queueSizes(name: string): Map<string, number> {
    if (this.sizesTruncated)
      throw new TaskError(
        `Channel '${name}': the run has more than 10,000 queues holding messages; the task carries only the first 10,000, so sizes are not known`,
        { nonRetryable: true },
      );
    const sizes = new Map<string, number>();
    for (const c of this.sizes) if (c.channel === name) sizes.set(c.instanceKey, (sizes.get(c.instanceKey) ?? 0) + Number(c.size));
    for (const p of this.publishList)
      if (p.channel === name) sizes.set(p.instanceKey, (sizes.get(p.instanceKey) ?? 0) + p.messages.length);
    return sizes;
  }

  /** True once `signal` aborted. */
  get cancelled(): boolean {
    return this.signal.aborted;
  }

  /** Appends `messages` to `channel` when this task's result is accepted, with it, in order. */
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
   * Tells the server the task is alive (needed with a heartbeat timeout).
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

/** The attempt's environment, given to waitFor and execute. */
export class StepContext<I = unknown> extends TaskContext {
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
  /** execute: WaitFor failed for good and its policy proceeded to execute (recoveryError says why). */
  readonly waitForFailed: boolean;
  /** Why WaitFor failed (waitForFailed), or why the Step this recovery Step replaces failed; "" otherwise. */
  readonly recoveryError: string;
  /** execute: every condition of the wait (empty after a skip or without waitFor). */
  readonly conditions: readonly ConditionResult[];

  private readonly localValues: Record<string, unknown>;
  private readonly wire: readonly WireConditionResult[];

  /** @internal */
  constructor(
    task: WireFlowTask,
    input: I,
    signal: AbortSignal,
    heartbeat: () => boolean,
    attributes: AttributeStore = new AttributeStore(new Map(), new Set(), [], `Step execution '${task.stepExecutionId}'`),
  ) {
    super(task, signal, heartbeat, attributes);
    this.stepType = task.stepType;
    this.stepExecutionId = task.stepExecutionId;
    this.method = task.method === "WAIT_FOR" ? "waitFor" : "execute";
    this.attempt = task.attempt;
    this.firstAttemptAt = task.firstAttemptUnixMs;
    this.scheduledBy = task.scheduledBy;
    this.input = input;
    this.attemptTimeoutMs = task.attemptTimeoutMs;
    this.waitForFailed = task.waitForFailed;
    this.recoveryError = task.recoveryError;
    this.wire = task.conditions;
    this.conditions = task.conditions.map((c) => conditionResult(c, task));
    this.localValues = localsOf(task);
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
  /**
   * execute: the child of a SubFlow condition of the wait, by condition ID or
   * index (none: the only one), its outputs as JSON (`SubFlow.result` decodes
   * them with the SubFlow's codec). Its `status` is "RUNNING" when another
   * condition won an AnyOf (the child keeps running). Throws a DexError
   * (INVALID_ARGUMENT) when the wait has no such SubFlow condition.
   */
  subFlow<O = unknown>(condition?: string | number): SubFlowResult<O> {
    return subFlowResultIn(this as StepContext<unknown>, condition) as SubFlowResult<O>;
  }
  /** execute: the children of every SubFlow condition of the wait, in its order. */
  subFlows(): SubFlowResult<unknown>[] {
    return this.conditions.flatMap((c) => (c.subFlow === undefined ? [] : [c.subFlow]));
  }
  /** @internal The task's conditions as the wire has them. */
  wireConditions(): readonly WireConditionResult[] {
    return this.wire;
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
}
