// The Step executions of a run, rebuilt from its history (GetHistoryEvents, every page) and its
// state (GetFlowState): who started whom, the phase, and the times of each method, for the Step
// graph and the timeline.
//
// What the history holds (proto/dex/flow_records.proto, HistoryEvent): each method's end (its
// last attempt's number, its error), each wait's end, each decision (its movements). It names
// no new execution's ID and no attempt's start, so:
// - a movement's new execution is `<Step type>-<n>`, n counting the type's executions in the run
//   (the server's own numbering, src/flow/run_editor.cc); GetFlowState's `scheduledBy` wins
//   wherever the state lists the execution (the active ones and the 100 that ended last);
// - an execution the history shows with no movement before it was started by the run's start,
//   an RPC (RPC_COMPLETED; parent "rpc:<name>") or a recovery (EXECUTE_FAILED) before it;
// - a method's attempts before its last are known from the state's last failure (when and why
//   the last failed attempt ended); without it, the method's one bar says how many there were.
import type { GetFlowStateResponse, HistoryEvent, Payload, StepExecutionView } from "../../../api/types";

export type Phase = "running" | "waiting" | "done" | "failed" | "canceled";

/** An attempt's (or a group of attempts') outcome, as the timeline colors it. */
export type Outcome = "completed" | "failed" | "timed_out" | "not_completed" | "running" | "queued" | "backoff" | "canceled";

export interface MethodRun {
  method: "WAIT_FOR" | "EXECUTE";
  start: number;
  end?: number; // unset: still under way
  attempts: number; // the last attempt's number
  outcome: Outcome;
  error?: string;
  lastFailure?: { attempt: number; outcome: Outcome; error: string; atMs: number };
}

export interface WaitSpan {
  start: number;
  end?: number;
  /** The wait has a Timer condition; `timerFired`: a Timer met it. */
  timer: boolean;
  timerFired: boolean;
  label: string;
}

export interface Execution {
  id: string;
  type: string;
  /** "": the run's start; "rpc:<name>"; "timeout"; another execution's ID; "?": not known. */
  parent: string;
  phase: Phase;
  created: number;
  ended?: number;
  waitFor?: MethodRun;
  wait?: WaitSpan;
  execute?: MethodRun;
  input?: Payload;
  decision?: unknown;
  view?: StepExecutionView;
  /** Creation order (the server's own, as the history shows it). */
  order: number;
}

export interface RunModel {
  executions: Execution[];
  byId: Map<string, Execution>;
  children: Map<string, string[]>;
  runStart: number;
  runEnd?: number;
  eventCount: number;
  /** The history was longer than the cap: the graph shows its first `eventCount` events. */
  truncated: boolean;
}

const executionKinds = new Set([
  "WAIT_FOR_COMPLETED",
  "WAIT_FOR_FAILED",
  "WAIT_COMPLETED",
  "EXECUTE_COMPLETED",
  "EXECUTE_FAILED",
  "TIMER_SKIPPED",
  "SUB_FLOW_STARTED",
  "SUB_FLOW_CLOSED",
  "LOCKS_ACQUIRED",
  "LOCKS_RELEASED",
]);

const idPattern = /^(.*)-(\d+)$/;

function splitId(id: string): { type: string; n: number } | undefined {
  const m = idPattern.exec(id);
  return m ? { type: m[1], n: Number(m[2]) } : undefined;
}

const isExecutionId = (id: string) =>
  id !== "" && id !== "timeout" && !id.startsWith("rpc:") && !id.startsWith("req:") && splitId(id) !== undefined;

function attemptOutcome(o: string | undefined): Outcome {
  switch (o) {
    case "ATTEMPT_COMPLETED":
      return "completed";
    case "ATTEMPT_TIMED_OUT":
      return "timed_out";
    case "ATTEMPT_NOT_COMPLETED":
      return "not_completed";
    default:
      return "failed";
  }
}

function viewPhase(p: string): Phase {
  switch (p) {
    case "PHASE_WAITING":
      return "waiting";
    case "PHASE_DONE":
      return "done";
    case "PHASE_FAILED":
      return "failed";
    case "PHASE_CANCELED":
      return "canceled";
    default:
      return "running";
  }
}

interface Decision {
  goTo?: { movements?: { stepType: string; input?: Payload }[] };
  cancelStepTypes?: string[];
  cancelSiblings?: boolean;
}

export function buildRunModel(
  events: HistoryEvent[],
  state: GetFlowStateResponse | undefined,
  truncated: boolean,
): RunModel {
  const byId = new Map<string, Execution>();
  const views = new Map<string, StepExecutionView>();
  for (const v of [...(state?.active ?? []), ...(state?.ended ?? [])])
    if (isExecutionId(v.stepExecutionId)) views.set(v.stepExecutionId, v);

  // Each type's numbering starts after the lowest number seen (a run continued as new goes on
  // counting from the runs before it).
  const counter = new Map<string, number>();
  const lowest = (id: string) => {
    const s = splitId(id);
    if (!s) return;
    const c = counter.get(s.type);
    if (c === undefined || s.n - 1 < c) counter.set(s.type, s.n - 1);
  };
  for (const e of events) if (isExecutionId(e.stepExecutionId)) lowest(e.stepExecutionId);
  for (const id of views.keys()) lowest(id);

  let runStart = Number(state?.flow?.startUnixMs ?? 0);
  let runEnd: number | undefined;
  let startSeen = false;
  let creator = "?"; // the last RPC or failure that may have started executions the history does not name
  let order = 0;

  const create = (id: string, parent: string, at: number, input?: Payload): Execution => {
    let x = byId.get(id);
    if (x) return x;
    const s = splitId(id)!;
    x = { id, type: s.type, parent, phase: "running", created: at, input, order: order++ };
    byId.set(id, x);
    if ((counter.get(s.type) ?? 0) < s.n) counter.set(s.type, s.n);
    return x;
  };
  const ensure = (id: string, at: number): Execution => {
    const x = byId.get(id);
    if (x) return x;
    if (!startSeen) {
      startSeen = true;
      return create(id, "", runStart || at);
    }
    return create(id, creator, at);
  };
  const cancel = (x: Execution, at: number) => {
    if (x.ended !== undefined) return;
    x.phase = "canceled";
    x.ended = at;
  };

  for (const e of events) {
    const at = Number(e.atMs);
    switch (e.kind) {
      case "FLOW_STARTED":
        runStart = at;
        continue;
      case "FLOW_CLOSED":
        runEnd = at;
        continue;
      case "RPC_COMPLETED":
        creator = `rpc:${e.rpcName}`;
        continue;
    }
    let x: Execution | undefined;
    if (executionKinds.has(e.kind) && isExecutionId(e.stepExecutionId)) x = ensure(e.stepExecutionId, at);
    switch (e.kind) {
      case "WAIT_FOR_COMPLETED":
      case "WAIT_FOR_FAILED": {
        if (!x) break;
        const ok = e.kind === "WAIT_FOR_COMPLETED";
        x.waitFor = { method: "WAIT_FOR", start: x.created, end: at, attempts: e.attempt, outcome: ok ? "completed" : "failed", error: e.error || undefined };
        if (ok) {
          const conds = ((e.wait as { conditions?: { timer?: unknown }[] } | undefined)?.conditions ?? []);
          x.wait = { start: at, timer: conds.some((c) => c.timer !== undefined), timerFired: false, label: "waiting" };
          x.phase = "waiting";
        } else {
          x.phase = "failed";
          x.ended = at;
        }
        break;
      }
      case "WAIT_COMPLETED": {
        if (!x) break;
        const conds = (e.conditions as { fired?: boolean; skipped?: boolean; condition?: { timer?: unknown; channel?: { channel: string }; subFlow?: unknown } }[] | undefined) ?? [];
        const fired = conds.filter((c) => c.fired);
        const timerFired = fired.some((c) => c.condition?.timer !== undefined);
        const label = fired
          .map((c) => (c.condition?.timer !== undefined ? (c.skipped ? "Timer (skipped)" : "Timer") : c.condition?.channel ? `Channel ${c.condition.channel.channel}` : c.condition?.subFlow ? "SubFlow" : "condition"))
          .join(", ");
        const w = x.wait ?? { start: x.waitFor?.end ?? x.created, timer: timerFired, timerFired, label: "" };
        x.wait = { ...w, end: at, timerFired, timer: w.timer || timerFired, label: label ? `met by ${label}` : "met" };
        x.phase = "running";
        break;
      }
      case "EXECUTE_COMPLETED":
      case "EXECUTE_FAILED":
      case "TIMEOUT_HANDLER_COMPLETED": {
        const ok = e.kind !== "EXECUTE_FAILED";
        const decider = x ? x.id : e.kind === "TIMEOUT_HANDLER_COMPLETED" ? "timeout" : undefined;
        if (x) {
          const start = x.wait?.end ?? x.waitFor?.end ?? x.created;
          x.execute = { method: "EXECUTE", start, end: at, attempts: e.attempt, outcome: ok ? "completed" : "failed", error: e.error || undefined };
          x.phase = ok ? "done" : "failed";
          x.ended = at;
          if (ok) x.decision = e.decision;
          else creator = x.id; // a recovery Step, if the failure policy names one
        }
        if (!ok || decider === undefined) break;
        const d = (e.decision ?? {}) as Decision;
        const parent = x?.parent;
        if (d.cancelSiblings && x)
          for (const y of byId.values()) if (y !== x && y.parent === parent && y.ended === undefined) cancel(y, at);
        if (d.cancelStepTypes?.length)
          for (const y of byId.values()) if (y !== x && d.cancelStepTypes.includes(y.type)) cancel(y, at);
        for (const m of d.goTo?.movements ?? []) {
          const n = (counter.get(m.stepType) ?? 0) + 1;
          counter.set(m.stepType, n);
          create(`${m.stepType}-${n}`, decider, at, m.input);
        }
        break;
      }
    }
  }

  // The state: the active executions and the last that ended, with their parent and phase.
  for (const [id, v] of views) {
    const x = byId.get(id) ?? create(id, v.scheduledBy, Number(v.createdUnixMs) || runStart);
    x.view = v;
    x.parent = v.scheduledBy;
    if (Number(v.createdUnixMs)) x.created = Number(v.createdUnixMs);
    x.phase = viewPhase(v.phase);
    const lf = v.lastFailure
      ? { attempt: v.lastFailure.attempt, outcome: attemptOutcome(v.lastFailure.outcome), error: v.lastFailure.error, atMs: Number(v.lastFailure.atMs) }
      : undefined;
    const method = v.method === "WAIT_FOR" ? "WAIT_FOR" : v.method === "EXECUTE" ? "EXECUTE" : undefined;
    if (x.phase === "running" && method) {
      // The method under way: its attempt runs, waits for a Worker, or waits for its retry.
      const start = method === "EXECUTE" ? (x.wait?.end ?? x.waitFor?.end ?? x.created) : x.created;
      const outcome: Outcome = v.taskState === "TASK_RUNNING" ? "running" : v.taskState === "TASK_BACKOFF" ? "backoff" : "queued";
      const run: MethodRun = { method, start, attempts: v.attempt, outcome, lastFailure: lf };
      if (method === "EXECUTE") x.execute = run;
      else x.waitFor = run;
      x.ended = undefined;
    } else if (x.phase === "waiting") {
      if (!x.wait) x.wait = { start: x.waitFor?.end ?? x.created, timer: false, timerFired: false, label: "waiting" };
      x.wait.timer = x.wait.timer || v.conditions.some((c) => c.condition?.timer !== undefined);
      x.ended = undefined;
    } else if (lf) {
      const m = method === "WAIT_FOR" ? x.waitFor : x.execute;
      if (m) m.lastFailure = lf;
    }
    if (x.phase !== "running" && x.phase !== "waiting" && x.ended === undefined) x.ended = runEnd;
  }

  // What had not ended when the run closed was canceled by the close. (While the run runs, an
  // execution ends only by its own method or a decision that cancels it, both in the history.)
  for (const x of byId.values()) if (x.ended === undefined && !views.has(x.id) && runEnd !== undefined) cancel(x, runEnd);

  for (const x of byId.values()) if (x.parent === "" && !x.input) x.input = state?.flow?.input;
  const executions = [...byId.values()].sort((a, b) => a.order - b.order);
  const children = new Map<string, string[]>();
  for (const x of executions) {
    const list = children.get(x.parent);
    if (list) list.push(x.id);
    else children.set(x.parent, [x.id]);
  }
  if (!runStart && executions.length) runStart = Math.min(...executions.map((x) => x.created));
  return { executions, byId, children, runStart, runEnd: runEnd ?? (state?.flow && Number(state.flow.closeUnixMs) ? Number(state.flow.closeUnixMs) : undefined), eventCount: events.length, truncated };
}

/** The end of the time axis: the run's close, or now while it runs. */
export function modelEnd(m: RunModel, now: number): number {
  if (m.runEnd !== undefined) return m.runEnd;
  let end = m.runStart;
  for (const x of m.executions) end = Math.max(end, x.ended ?? now);
  return end;
}
