// The public shapes of flows and flow types, converted from the wire: enums
// without their prefixes ("COMPLETED", not "FLOW_STATUS_COMPLETED"), JSON text
// parsed into values, times in Unix milliseconds (0: not set).
import type { WireAttempt, WireFlow, WireFlowType, WireStep, WireStepDef } from "./proto";

/** JSON as it travels: anything JSON.stringify turns into text and JSON.parse back. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export type FlowStatus = "RUNNING" | "COMPLETED" | "FAILED" | "CANCELLED" | "UNSPECIFIED";
export type StepStatus =
  | "PENDING"
  | "READY"
  | "RUNNING"
  | "BACKOFF"
  | "SLEEPING"
  | "COMPLETED"
  | "FAILED"
  | "CANCELLED"
  | "UNSPECIFIED";
/** "RUNNING": the attempt has not ended (the proto's UNSPECIFIED). */
export type AttemptOutcome = "RUNNING" | "COMPLETED" | "FAILED" | "TIMED_OUT" | "NOT_COMPLETED";
export type DispatchMode = "SYNC" | "ASYNC";

export interface Attempt {
  /** From 1. */
  number: number;
  outcome: AttemptOutcome;
  workerId: string;
  startedAtMs: number;
  endedAtMs: number;
  /** Why it failed, timed out or did not complete; "" otherwise. */
  error: string;
}

export interface Step {
  name: string;
  status: StepStatus;
  attempts: Attempt[];
  /** The Step's output (parsed JSON) once COMPLETED; undefined before. */
  output: unknown;
  /** Why it FAILED; "" otherwise. */
  error: string;
  /** BACKOFF / SLEEPING: when the durable timer fires; 0 otherwise. */
  wakeAtMs: number;
}

export interface Flow {
  flowId: string;
  flowType: string;
  status: FlowStatus;
  /** The flow's input (parsed JSON; {} when it was started without one). */
  input: unknown;
  /** Its Steps in the order of the flow type's definition. */
  steps: Step[];
  /**
   * The output of the flow's last Step (the last one in its flow type's
   * definition) once that Step COMPLETED; undefined otherwise. Every Step's
   * output is in `steps`; `stepOutputs` has them by name.
   */
  output: unknown;
  /** The outputs of the COMPLETED Steps, by Step name. */
  stepOutputs: Record<string, unknown>;
  /** Why it FAILED; "" otherwise. */
  error: string;
  createdAtMs: number;
  /** When it ended; 0 while it runs. */
  endedAtMs: number;
}

export interface RetryPolicy {
  /** 1: no retry. */
  maxAttempts: number;
  initialIntervalMs: number;
  backoffCoefficient: number;
  maxIntervalMs: number;
}

export interface StepDef {
  name: string;
  /** "" for a sleep Step. */
  taskQueue: string;
  after: string[];
  retry: RetryPolicy | undefined;
  startToCloseTimeoutMs: number;
  /** 0: no heartbeat needed. */
  heartbeatTimeoutMs: number;
  dispatch: DispatchMode;
  /** > 0: a durable timer instead of a task. */
  sleepMs: number;
}

export interface FlowType {
  name: string;
  steps: StepDef[];
}

function stripPrefix(name: string, prefix: string): string {
  return name.startsWith(prefix) ? name.slice(prefix.length) : name;
}

/** JSON text as a value; text that is not JSON stays text; "" is undefined. */
export function parseJsonText(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function toAttempt(a: WireAttempt): Attempt {
  const outcome = stripPrefix(a.outcome, "ATTEMPT_OUTCOME_");
  return {
    number: a.number,
    outcome: (outcome === "UNSPECIFIED" ? "RUNNING" : outcome) as AttemptOutcome,
    workerId: a.workerId,
    startedAtMs: a.startedAtMs,
    endedAtMs: a.endedAtMs,
    error: a.error,
  };
}

function toStep(s: WireStep): Step {
  return {
    name: s.name,
    status: stripPrefix(s.status, "STEP_STATUS_") as StepStatus,
    attempts: s.attempts.map(toAttempt),
    output: parseJsonText(s.output),
    error: s.error,
    wakeAtMs: s.wakeAtMs,
  };
}

export function toFlow(f: WireFlow): Flow {
  const steps = f.steps.map(toStep);
  const stepOutputs: Record<string, unknown> = {};
  for (const step of steps) {
    if (step.status === "COMPLETED") stepOutputs[step.name] = step.output;
  }
  const last = steps[steps.length - 1];
  const input = parseJsonText(f.input);
  return {
    flowId: f.flowId,
    flowType: f.flowType,
    status: stripPrefix(f.status, "FLOW_STATUS_") as FlowStatus,
    input: input === undefined ? {} : input,
    steps,
    output: last !== undefined && last.status === "COMPLETED" ? last.output : undefined,
    stepOutputs,
    error: f.error,
    createdAtMs: f.createdAtMs,
    endedAtMs: f.endedAtMs,
  };
}

function toStepDef(d: WireStepDef): StepDef {
  const dispatch = stripPrefix(d.dispatch, "DISPATCH_MODE_");
  return {
    name: d.name,
    taskQueue: d.taskQueue,
    after: [...d.after],
    retry: d.retry === null ? undefined : { ...d.retry },
    startToCloseTimeoutMs: d.startToCloseTimeoutMs,
    heartbeatTimeoutMs: d.heartbeatTimeoutMs,
    dispatch: dispatch === "ASYNC" ? "ASYNC" : "SYNC",
    sleepMs: d.sleepMs,
  };
}

export function toFlowType(t: WireFlowType): FlowType {
  return { name: t.name, steps: t.steps.map(toStepDef) };
}

/** "COMPLETED" → "FLOW_STATUS_COMPLETED" for requests. */
export function flowStatusToWire(status: FlowStatus | undefined): string {
  return `FLOW_STATUS_${status ?? "UNSPECIFIED"}`;
}
