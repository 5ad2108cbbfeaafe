// The public shapes of the dex Flow API's answers (proto.ts: FLOW_SERVICE),
// converted from the wire: enums without their prefixes ("COMPLETED", not
// "FLOW_COMPLETED"), Payloads decoded from JSON (a payload that is not JSON
// stays a Buffer), times in Unix milliseconds (0: not set).
import { Attribute, AttributeMap, type AttributeTypeName, type AttributeValue } from "./flow/attributes";
import { attributeValueFromWire, wireAttributeType } from "./flow/attributes";
import type { StepRef } from "./flow/checks";
import { DexError } from "./errors";
import type {
  WireAttribute,
  WireCondition,
  WireConditionResult,
  WireFlowConfig,
  WireFlowDescription,
  WireGetFlowStateResponse,
  WireGetHistoryEventsResponse,
  WireHistoryEvent,
  WirePayload,
  WirePublish,
  WireStepDecision,
  WireStepExecutionView,
  WireStepMovement,
  WireTimeTravelPoint,
  WireWait,
} from "./proto";

/**
 * A run's status. CONTINUED_AS_NEW: the run went on as a new run of its Flow
 * ID (FlowDescription.nextRunId), which holds its state; not an end of the Flow.
 */
export type RunStatus =
  | "RUNNING"
  | "COMPLETED"
  | "FAILED"
  | "CANCELED"
  | "TERMINATED"
  | "TIMED_OUT"
  | "CONTINUED_AS_NEW"
  | "UNSPECIFIED";
export type StepPhase = "WAIT_FOR" | "WAITING" | "EXECUTE" | "DONE" | "FAILED" | "CANCELED" | "UNSPECIFIED";
export type HistoryEventKind =
  | "FLOW_STARTED"
  | "WAIT_FOR_COMPLETED"
  | "WAIT_FOR_FAILED"
  | "WAIT_COMPLETED"
  | "EXECUTE_COMPLETED"
  | "EXECUTE_FAILED"
  | "CHANNEL_PUBLISHED"
  | "TIMER_SKIPPED"
  | "FLOW_CLOSED"
  | "RPC_COMPLETED"
  | "RPC_FAILED"
  | "ATTRIBUTES_SET"
  | "LOCKS_ACQUIRED"
  | "LOCKS_RELEASED"
  | "SUB_FLOW_STARTED"
  | "SUB_FLOW_CLOSED"
  | "TIMEOUT_HANDLER_STARTED"
  | "TIMEOUT_HANDLER_FAILED"
  | "TIMEOUT_HANDLER_COMPLETED"
  | "TIME_TRAVELED"
  | "CONTINUE_AS_NEW_REQUESTED"
  | "FLOW_CONFIG_UPDATED"
  | "UNSPECIFIED";

/** A value from the wire: JSON decoded; empty is null; bytes that are not JSON stay a Buffer. */
export function decodeValue(payload: WirePayload | null | undefined): unknown {
  const data = payload?.data;
  if (data === undefined || data.length === 0) return null;
  const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  try {
    return JSON.parse(buffer.toString("utf8")) as unknown;
  } catch {
    return buffer;
  }
}

function strip(name: string, prefix: string): string {
  return name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

/** FlowStatus by name ("FLOW_RUNNING") as a RunStatus ("RUNNING"). */
export function toRunStatus(status: string | undefined): RunStatus {
  return strip(status ?? "FLOW_STATUS_UNSPECIFIED", "FLOW_").replace("STATUS_", "") as RunStatus;
}

/** One Attribute (or AttributeMap instance) of a run, decoded by its type; value undefined: deleted (in a write). */
export interface AttributeEntry {
  key: string;
  /** "" for a plain Attribute. */
  instanceKey: string;
  /** undefined when it has no value. */
  type: AttributeTypeName | undefined;
  value: AttributeValue | undefined;
}

export function toAttributeEntry(a: WireAttribute): AttributeEntry {
  const what = a.instanceKey === "" ? `the Attribute '${a.key}'` : `the AttributeMap '${a.key}' [${a.instanceKey}]`;
  return { key: a.key, instanceKey: a.instanceKey, type: wireAttributeType(a.value), value: attributeValueFromWire(a.value, what) };
}

/** A run's Attributes as Client.getAttributes answers them. */
export class FlowAttributes {
  readonly runId: string;
  readonly status: RunStatus;
  /** In key order; keys with no value are absent. */
  readonly entries: readonly AttributeEntry[];

  constructor(runId: string, status: RunStatus, entries: AttributeEntry[]) {
    this.runId = runId;
    this.status = status;
    this.entries = entries;
  }

  private typed(e: AttributeEntry, declared: AttributeTypeName): AttributeValue | undefined {
    if (e.type !== declared) {
      const name = e.instanceKey === "" ? `'${e.key}'` : `'${e.key}' [${e.instanceKey}]`;
      throw new DexError("INVALID_ARGUMENT", `the run's Attribute ${name} is a ${String(e.type)}, not a ${declared}`);
    }
    return e.value;
  }

  /** The value of an Attribute (or of one instance of an AttributeMap); undefined when it has none. */
  get<T extends AttributeValue>(attribute: Attribute<T>): T | undefined;
  get<T extends AttributeValue>(map: AttributeMap<T>, instanceKey: string): T | undefined;
  get(attribute: Attribute | AttributeMap, instanceKey = ""): AttributeValue | undefined {
    const ik = attribute instanceof AttributeMap ? instanceKey : "";
    const e = this.entries.find((x) => x.key === attribute.key && x.instanceKey === ik);
    return e === undefined ? undefined : this.typed(e, attribute.type);
  }

  /** Every instance of an AttributeMap that has a value, by instance key. */
  instances<T extends AttributeValue>(map: AttributeMap<T>): Map<string, T> {
    const out = new Map<string, T>();
    for (const e of this.entries) if (e.key === map.key) out.set(e.instanceKey, this.typed(e, map.type) as T);
    return out;
  }
}

export interface StepOutput {
  stepType: string;
  stepExecutionId: string;
  output: unknown;
}

/** One run of a Flow ID, as DescribeFlow tells it. */
export interface FlowDescription {
  flowId: string;
  runId: string;
  flowType: string;
  declarationVersion: number;
  status: RunStatus;
  startedAt: number;
  /** 0 while RUNNING. */
  closedAt: number;
  /** FAILED, CANCELED, TERMINATED, TIMED_OUT: why. */
  closeReason: string;
  /** The result: the output of every Step that completed the Flow, in order. */
  outputs: StepOutput[];
  /** outputs[0]?.output: the result of a Flow that one Step completed. */
  output: unknown;
  input: unknown;
  /** Runs started with this Flow ID. */
  runs: number;
  /** A SubFlow child: the parents' waits it meets when it closes (the first started it; later ones attached). */
  parents: { flowId: string; runId: string; stepExecutionId: string; conditionIndex: number }[];
  /** Flow retry: this run's attempt (1: the first run; 0 from a server that does not say). */
  flowAttempt: number;
  /** Flow retry: the run before this one ("" for the first). */
  previousRunId: string;
  /** Flow retry: the run after this one, pending or started ("": none follows). */
  nextRunId: string;
  /** Flow retry: when the pending next run starts (Unix ms; 0 once started or when none follows). */
  retryAt: number;
  /** Retention (the server's flows.retention): when this run, closed for good, is deleted (Unix ms; 0 while it runs or a retry follows). */
  expiresAt: number;
  /** Time travel: the run this one was started from ("": none). */
  traveledFromRunId: string;
  /** Time travel: the latest run started from this one ("": none). */
  traveledToRunId: string;
  /**
   * Continue-as-new: the run this one continues ("": none). The run after a
   * run that closed CONTINUED_AS_NEW is its nextRunId.
   */
  continuedFromRunId: string;
}

export function toFlowDescription(d: WireFlowDescription | null): FlowDescription {
  const outputs = (d?.outputs ?? []).map((o) => ({
    stepType: o.stepType,
    stepExecutionId: o.stepExecutionId,
    output: decodeValue(o.output),
  }));
  return {
    flowId: d?.flowId ?? "",
    runId: d?.runId ?? "",
    flowType: d?.flowType ?? "",
    declarationVersion: d?.declarationVersion ?? 0,
    status: toRunStatus(d?.status),
    startedAt: d?.startUnixMs ?? 0,
    closedAt: d?.closeUnixMs ?? 0,
    closeReason: d?.closeReason ?? "",
    outputs,
    output: outputs[0]?.output,
    input: decodeValue(d?.input),
    runs: d?.runs ?? 0,
    parents: (d?.parents ?? []).map((p) => ({
      flowId: p.flowId,
      runId: p.runId,
      stepExecutionId: p.stepExecutionId,
      conditionIndex: p.conditionIndex,
    })),
    flowAttempt: d?.flowAttempt ?? 0,
    previousRunId: d?.previousRunId ?? "",
    nextRunId: d?.nextRunId ?? "",
    retryAt: d?.retryUnixMs ?? 0,
    expiresAt: d?.expireUnixMs ?? 0,
    traveledFromRunId: d?.traveledFromRunId ?? "",
    traveledToRunId: d?.traveledToRunId ?? "",
    continuedFromRunId: d?.continuedFromRunId ?? "",
  };
}

/**
 * Where time travel (Client.timeTravel) starts its new run from, in the
 * history of the Flow ID's latest run:
 * - `{ beginning: true }`: just after the run started;
 * - `{ eventTime }`: after the run's last record at or before that time (a Date, or Unix ms);
 * - `{ stepType, which? }`: the start of the latest execution of that Step type
 *   (a name or the Step; "latest", the default), or of its first ("first");
 * - `{ stepExecutionId }`: the start of that execution ("Charge-2").
 * A point at or after the run closed means the last state before it closed.
 */
export type TimeTravelPoint =
  | { beginning: true }
  | { eventTime: Date | number }
  | { stepType: StepRef; which?: "first" | "latest" }
  | { stepExecutionId: string };

/** A TimeTravelPoint as the history tells it (a FLOW_STARTED of a time-traveled run); it can be passed back to timeTravel. */
export type TimeTravelPointView =
  | { beginning: true }
  | { eventTime: number }
  | { stepType: string; which: "first" | "latest" }
  | { stepExecutionId: string };

/** undefined: no point, or a kind this SDK does not know. */
export function toTimeTravelPoint(p: WireTimeTravelPoint | null | undefined): TimeTravelPointView | undefined {
  switch (p?.kind) {
    case "TIME_TRAVEL_BEGINNING":
      return { beginning: true };
    case "TIME_TRAVEL_EVENT_TIME":
      return { eventTime: p.eventTimeMs ?? 0 };
    case "TIME_TRAVEL_FIRST_OF_STEP_TYPE":
      return { stepType: p.stepType ?? "", which: "first" };
    case "TIME_TRAVEL_LATEST_OF_STEP_TYPE":
      return { stepType: p.stepType ?? "", which: "latest" };
    case "TIME_TRAVEL_STEP_EXECUTION":
      return { stepExecutionId: p.stepExecutionId ?? "" };
    default:
      return undefined;
  }
}

/** A condition of a wait as the history and the state show it. */
export type ConditionSpec =
  | { id: string; kind: "timer"; durationMs?: number; atUnixMs?: number }
  | {
      id: string;
      kind: "channel";
      channel: string;
      instanceKey: string;
      match: "FOR_ONE" | "FOR_N" | "AT_LEAST" | "AT_MOST" | "AT_LEAST_AT_MOST" | "UNSPECIFIED";
      min: number;
      max: number;
    }
  | {
      id: string;
      kind: "subFlow";
      flowType: string;
      input: unknown;
      reusePolicy: "ATTACH" | "RESTART_IF_PREVIOUS_EXITS_ABNORMALLY" | "ALWAYS_RESTART" | "UNSPECIFIED";
      /** The child's StartOptions as the wire has them. */
      options: unknown;
    };

export function toConditionSpec(c: WireCondition | null): ConditionSpec {
  if (c?.subFlow !== undefined && c.subFlow !== null) {
    const policy = c.subFlow.reusePolicy ?? "";
    return {
      id: c.conditionId,
      kind: "subFlow",
      flowType: c.subFlow.flowType,
      input: decodeValue(c.subFlow.input),
      reusePolicy: (policy === "" || policy.endsWith("_UNSPECIFIED") ? "UNSPECIFIED" : strip(policy, "SUB_FLOW_")) as "ATTACH",
      options: c.subFlow.options ?? null,
    };
  }
  if (c?.channel !== undefined && c.channel !== null) {
    return {
      id: c.conditionId,
      kind: "channel",
      channel: c.channel.channel,
      instanceKey: c.channel.instanceKey,
      match: strip(c.channel.match, "CHANNEL_MATCH_") as "FOR_ONE",
      min: c.channel.min,
      max: c.channel.max,
    };
  }
  const t = c?.timer;
  const spec: ConditionSpec = { id: c?.conditionId ?? "", kind: "timer" };
  if (t?.when === "atUnixMs" || (t?.atUnixMs ?? 0) !== 0) spec.atUnixMs = t?.atUnixMs ?? 0;
  else spec.durationMs = t?.durationMs ?? 0;
  return spec;
}

export interface WaitView {
  kind: "ANY_OF" | "ALL_OF" | "ANY_COMBINATION_OF" | "SKIP" | "UNSPECIFIED";
  conditions: ConditionSpec[];
  combinations: string[][];
}

function toWaitView(w: WireWait | null): WaitView | undefined {
  if (w === null) return undefined;
  return {
    kind: strip(w.kind, "WAIT_KIND_") as WaitView["kind"],
    conditions: w.conditions.map(toConditionSpec),
    combinations: w.combinations.map((g) => [...g.conditionIds]),
  };
}

export interface MovementView {
  stepType: string;
  input: unknown;
  /** Options replaced for this execution (the wire's StepOptions), if any. */
  options?: unknown;
}

export type DecisionView = {
  cancelStepTypes: string[];
  cancelSiblings: boolean;
  /** Set (true) when the decision asked the run to continue as new. */
  continueAsNew?: true;
} & (
  | { kind: "goTo"; movements: MovementView[] }
  | { kind: "gracefulComplete" | "forceComplete"; output: unknown }
  | { kind: "forceFail"; reason: string }
  | { kind: "deadEnd" }
  | {
      kind: "forceCompleteIfChannelsEmpty";
      channels: { channel: string; instanceKey: string; allInstances: boolean }[];
      output: unknown;
      otherwise: MovementView[];
    }
  | { kind: "unspecified" }
);

function toMovement(m: WireStepMovement): MovementView {
  const v: MovementView = { stepType: m.stepType, input: decodeValue(m.input) };
  if (m.options !== null && m.options !== undefined) v.options = m.options;
  return v;
}

function toDecisionView(d: WireStepDecision | null): DecisionView | undefined {
  if (d === null) return undefined;
  const base: { cancelStepTypes: string[]; cancelSiblings: boolean; continueAsNew?: true } = {
    cancelStepTypes: [...d.cancelStepTypes],
    cancelSiblings: d.cancelSiblings,
  };
  if (d.continueAsNew === true) base.continueAsNew = true;
  switch (d.kind) {
    case "goTo":
      return { ...base, kind: "goTo", movements: (d.goTo?.movements ?? []).map(toMovement) };
    case "gracefulComplete":
      return { ...base, kind: "gracefulComplete", output: decodeValue(d.gracefulComplete) };
    case "forceComplete":
      return { ...base, kind: "forceComplete", output: decodeValue(d.forceComplete) };
    case "forceFail":
      return { ...base, kind: "forceFail", reason: d.forceFail ?? "" };
    case "deadEnd":
      return { ...base, kind: "deadEnd" };
    case "forceCompleteIfChannelsEmpty": {
      const c = d.forceCompleteIfChannelsEmpty;
      return {
        ...base,
        kind: "forceCompleteIfChannelsEmpty",
        channels: (c?.channels ?? []).map((r) => ({ ...r })),
        output: decodeValue(c?.output),
        otherwise: (c?.otherwise ?? []).map(toMovement),
      };
    }
    default:
      return { ...base, kind: "unspecified" };
  }
}

export interface ConditionResultView {
  index: number;
  id: string;
  fired: boolean;
  skipped: boolean;
  condition: ConditionSpec;
  /** The messages it took (decoded). */
  messages: unknown[];
  /** A SubFlow condition: its child as the wait saw it (RUNNING: it lost an AnyOf and keeps running). */
  subFlow?: SubFlowView;
}

/** A SubFlow's child in a history event. */
export interface SubFlowView {
  flowId: string;
  runId: string;
  status: RunStatus;
  outputs: StepOutput[];
  closeReason: string;
}

function toConditionResultView(c: WireConditionResult): ConditionResultView {
  const v: ConditionResultView = {
    index: c.index,
    id: c.conditionId,
    fired: c.fired,
    skipped: c.skipped,
    condition: toConditionSpec(c.condition),
    messages: c.messages.map(decodeValue),
  };
  const r = c.subFlow;
  if (r !== undefined && r !== null) {
    v.subFlow = {
      flowId: r.flowId,
      runId: r.runId,
      status: toRunStatus(r.status),
      outputs: r.outputs.map((o) => ({ stepType: o.stepType, stepExecutionId: o.stepExecutionId, output: decodeValue(o.output) })),
      closeReason: r.closeReason,
    };
  }
  return v;
}

export interface PublishView {
  channel: string;
  instanceKey: string;
  messages: unknown[];
}

function toPublishView(p: WirePublish | null): PublishView | undefined {
  if (p === null) return undefined;
  return { channel: p.channel, instanceKey: p.instanceKey, messages: p.messages.map(decodeValue) };
}

/** One semantic event of a run's history. Fields that do not apply to its kind are empty. */
export interface HistoryEvent {
  seq: number;
  kind: HistoryEventKind;
  at: number;
  stepExecutionId: string;
  attempt: number;
  error: string;
  /** WAIT_FOR_COMPLETED: the wait. */
  wait?: WaitView;
  /** EXECUTE_COMPLETED: the decision. */
  decision?: DecisionView;
  /** WAIT_COMPLETED: what met the wait. */
  conditions: ConditionResultView[];
  /** CHANNEL_PUBLISHED: a client's publish. */
  publish?: PublishView;
  /** FLOW_CLOSED; SUB_FLOW_CLOSED: the child's. */
  status?: RunStatus;
  reason: string;
  /** Method and RPC results, ATTRIBUTES_SET: the writes, in order (value undefined: deleted). */
  attributeWrites: AttributeEntry[];
  /** RPC_COMPLETED, RPC_FAILED. */
  rpcName: string;
  /** RPC_COMPLETED: the output (JSON decoded). */
  output?: unknown;
  /** LOCKS_ACQUIRED, LOCKS_RELEASED: the keys, and the method that holds them (stepExecutionId: the execution or RPC ID). */
  lockKeys: string[];
  method?: "WAIT_FOR" | "EXECUTE" | "RPC" | "ON_TIMEOUT";
  /** SUB_FLOW_STARTED, SUB_FLOW_CLOSED: the child (Flow ID, run), the condition's index; attached: its run existed. */
  childFlowId: string;
  childRunId: string;
  conditionIndex: number;
  attached: boolean;
  /** FLOW_STARTED of a Flow retry: the run before. */
  previousRunId: string;
  /**
   * FLOW_CLOSED with a Flow retry to follow: the next run's ID and when it
   * starts (Unix ms; 0: none). TIME_TRAVELED: the run time travel started
   * from this one (`reason`: why).
   */
  nextRunId: string;
  retryAt: number;
  /** FLOW_STARTED of a time-traveled run: the run it was started from, and the point (`reason`: why). */
  traveledFromRunId: string;
  timeTravelPoint?: TimeTravelPointView;
  /** FLOW_STARTED of a run continued as new: the run it continues (`reason`: why). */
  continuedFromRunId: string;
  /** FLOW_CONFIG_UPDATED: the run's effective FlowConfig before and after the update. */
  oldConfig?: EffectiveFlowConfig;
  newConfig?: EffectiveFlowConfig;
}

function toHistoryEvent(e: WireHistoryEvent): HistoryEvent {
  const out: HistoryEvent = {
    seq: e.seq,
    kind: strip(e.kind, "HISTORY_KIND_") as HistoryEventKind,
    at: e.atMs,
    stepExecutionId: e.stepExecutionId,
    attempt: e.attempt,
    error: e.error,
    conditions: e.conditions.map(toConditionResultView),
    reason: e.reason,
    attributeWrites: (e.attributeWrites ?? []).map(toAttributeEntry),
    rpcName: e.rpcName ?? "",
    lockKeys: [...(e.lockKeys ?? [])],
    childFlowId: e.childFlowId ?? "",
    childRunId: e.childRunId ?? "",
    conditionIndex: e.conditionIndex ?? 0,
    attached: e.attached ?? false,
    previousRunId: e.previousRunId ?? "",
    nextRunId: e.nextRunId ?? "",
    retryAt: e.retryAtMs ?? 0,
    traveledFromRunId: e.traveledFromRunId ?? "",
    continuedFromRunId: e.continuedFromRunId ?? "",
  };
  const point = toTimeTravelPoint(e.timeTravelPoint);
  if (point !== undefined) out.timeTravelPoint = point;
  if (e.kind === "RPC_COMPLETED") out.output = decodeValue(e.output);
  if (e.method === "WAIT_FOR" || e.method === "EXECUTE" || e.method === "RPC" || e.method === "ON_TIMEOUT") out.method = e.method;
  const wait = toWaitView(e.wait);
  if (wait !== undefined) out.wait = wait;
  const decision = toDecisionView(e.decision);
  if (decision !== undefined) out.decision = decision;
  const publish = toPublishView(e.publish);
  if (publish !== undefined) out.publish = publish;
  if (e.kind === "FLOW_CLOSED" || e.kind === "SUB_FLOW_CLOSED") out.status = strip(e.status, "FLOW_") as RunStatus;
  if (e.kind === "FLOW_CONFIG_UPDATED") {
    out.oldConfig = toEffectiveFlowConfig(e.oldConfig);
    out.newConfig = toEffectiveFlowConfig(e.newConfig);
  }
  return out;
}

export interface HistoryPage {
  runId: string;
  events: HistoryEvent[];
  /** More events follow: ask again after the last seq. */
  more: boolean;
}

export function toHistoryPage(r: WireGetHistoryEventsResponse): HistoryPage {
  return { runId: r.runId, events: r.events.map(toHistoryEvent), more: r.more };
}

export interface StepExecutionState {
  stepExecutionId: string;
  stepType: string;
  phase: StepPhase;
  scheduledBy: string;
  /** The method running or next (ON_TIMEOUT: FlowState.timeoutHandler). */
  method: "WAIT_FOR" | "EXECUTE" | "ON_TIMEOUT" | "UNSPECIFIED";
  attempt: number;
  /** LOCKED: waits for a lock key another attempt or RPC of the run holds. */
  taskState: "QUEUED" | "RUNNING" | "BACKOFF" | "LOCKED" | "UNSPECIFIED";
  workerId: string;
  /** BACKOFF: when the next attempt starts. */
  retryAt: number;
  /** The last failed attempt of the current method, if any. */
  lastFailure?: { attempt: number; outcome: string; error: string; at: number };
  /** WAITING: each condition, with the messages queued for a Channel condition now. */
  conditions: {
    condition: ConditionSpec;
    fired: boolean;
    skipped: boolean;
    timerAt: number;
    queued: number;
    /** A SubFlow condition: its child's Flow ID and latest run ("" before it started). */
    childFlowId: string;
    childRunId: string;
  }[];
  createdAt: number;
}

export interface FlowState {
  flow: FlowDescription;
  active: StepExecutionState[];
  /** Workers connected to this process that host the Flow type (empty: none, which is why tasks wait). */
  workers: string[];
  /** The timeout handler while it runs (stepExecutionId "timeout", method ON_TIMEOUT); absent otherwise. */
  timeoutHandler?: StepExecutionState;
  /** The Channel queues that hold messages (a Channel, or one ChannelMap instance), in (channel, instance key) order: the first 1,000. */
  queues: ChannelQueueState[];
  /** Queues holding messages past the first 1,000. */
  queuesOmitted: number;
  /** Every Attribute and AttributeMap instance of the run, in (key, instance key) order. */
  attributes: StateAttribute[];
  /** Ended Step executions (phase DONE, FAILED or CANCELED): the 100 created last, newest first. Queued ones are in `active` (taskState QUEUED). */
  ended: StepExecutionState[];
  /** Every ended execution of the run, those in `ended` included. */
  endedCount: number;
  /** The run's effective FlowConfig (docs/flow-rules.md, "FlowConfig"), every field filled in. */
  config: EffectiveFlowConfig;
}

/**
 * A run's effective FlowConfig (getFlowState, Client.updateFlowConfig): the
 * Flow's, a start's override and any updates, with the defaults written out.
 */
export interface EffectiveFlowConfig {
  /** Continue as new once the history holds this many events (0: never for that reason). */
  continueAsNewAfterEvents: number;
  /** Continue as new once the history's events hold this many bytes (0: never for that reason). */
  continueAsNewAfterBytes: number;
  /** The durability of Step methods (and the timeout handler) whose options set none. */
  defaultDurability: "sync" | "async";
  /** The Attribute Store the run syncs to ("": none). */
  attributeStore: string;
  /** Whether search's ActiveStepTypes holds the run's active Step types. */
  indexActiveStepTypes: boolean;
}

/** A FlowConfig from the wire, unset fields as their defaults. */
export function toEffectiveFlowConfig(c: WireFlowConfig | null | undefined): EffectiveFlowConfig {
  return {
    continueAsNewAfterEvents: c?.continueAsNewAfterEvents ?? 0,
    continueAsNewAfterBytes: c?.continueAsNewAfterBytes ?? 0,
    defaultDurability: c?.defaultDurability === "ASYNC" ? "async" : "sync",
    attributeStore: c?.attributeStore ?? "",
    indexActiveStepTypes: c?.indexActiveStepTypes ?? true,
  };
}

/** A queued Channel message as the state shows it; omittedBytes > 0: its value (this long) was left out (the state's values are at most 8 MiB together), and value is undefined. */
export interface QueuedMessage {
  seq: number;
  value: unknown;
  omittedBytes: number;
}

/** One Channel queue that holds messages: how many, and the oldest (up to 5), oldest first. */
export interface ChannelQueueState {
  channel: string;
  /** A ChannelMap's instance; "" for a Channel. */
  instanceKey: string;
  count: number;
  messages: QueuedMessage[];
}

/** An Attribute of the state; omittedBytes > 0: its value (this long) was left out (type and value undefined). */
export interface StateAttribute extends AttributeEntry {
  omittedBytes: number;
}

function toStepState(a: WireStepExecutionView): StepExecutionState {
  const s: StepExecutionState = {
    stepExecutionId: a.stepExecutionId,
    stepType: a.stepType,
    phase: strip(a.phase, "PHASE_") as StepPhase,
    scheduledBy: a.scheduledBy,
    method: a.method === "METHOD_UNSPECIFIED" ? "UNSPECIFIED" : (a.method as "WAIT_FOR"),
    attempt: a.attempt,
    taskState: (a.taskState === "TASK_STATE_UNSPECIFIED"
      ? "UNSPECIFIED"
      : strip(a.taskState, "TASK_")) as StepExecutionState["taskState"],
    workerId: a.workerId,
    retryAt: a.retryUnixMs,
    conditions: a.conditions.map((c) => ({
      condition: toConditionSpec(c.condition),
      fired: c.fired,
      skipped: c.skipped,
      timerAt: c.timerUnixMs,
      queued: c.queued,
      childFlowId: c.childFlowId ?? "",
      childRunId: c.childRunId ?? "",
    })),
    createdAt: a.createdUnixMs,
  };
  if (a.lastFailure !== null && a.lastFailure.attempt > 0) {
    s.lastFailure = {
      attempt: a.lastFailure.attempt,
      outcome: strip(a.lastFailure.outcome, "ATTEMPT_"),
      error: a.lastFailure.error,
      at: a.lastFailure.atMs,
    };
  }
  return s;
}

export function toFlowState(r: WireGetFlowStateResponse): FlowState {
  const state: FlowState = {
    flow: toFlowDescription(r.flow),
    active: r.active.map(toStepState),
    workers: [...r.workers],
    queues: (r.queues ?? []).map((q) => ({
      channel: q.channel,
      instanceKey: q.instanceKey ?? "",
      count: q.count,
      messages: (q.messages ?? []).map((m) => ({
        seq: m.seq,
        value: (m.omittedBytes ?? 0) > 0 ? undefined : decodeValue(m.message),
        omittedBytes: m.omittedBytes ?? 0,
      })),
    })),
    queuesOmitted: r.queuesOmitted ?? 0,
    attributes: (r.attributes ?? []).flatMap((a) => {
      if (a.attribute === null) return [];
      const omittedBytes = a.omittedBytes ?? 0;
      if (omittedBytes > 0) return [{ key: a.attribute.key, instanceKey: a.attribute.instanceKey, type: undefined, value: undefined, omittedBytes }];
      return [{ ...toAttributeEntry(a.attribute), omittedBytes }];
    }),
    ended: (r.ended ?? []).map(toStepState),
    endedCount: r.endedCount ?? 0,
    config: toEffectiveFlowConfig(r.config),
  };
  if (r.timeoutHandler !== undefined && r.timeoutHandler !== null) state.timeoutHandler = toStepState(r.timeoutHandler);
  return state;
}
