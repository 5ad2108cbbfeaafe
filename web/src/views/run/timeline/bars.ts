// The timeline's bars of one execution: its WaitFor attempts, its wait (a Timer's wait drawn in
// its own style), its Execute attempts. The history records each method's end and its last
// attempt's number; the state's last failure (when the last failed attempt ended, and why) splits
// a retried method into its failed attempts and the last one; without it, one bar says how many
// attempts there were.
import type { Execution, MethodRun, Outcome } from "../graph/runModel";

export interface Bar {
  key: string;
  kind: "attempt" | "wait" | "backoff";
  method: "WaitFor" | "Execute" | "wait";
  start: number;
  end: number;
  open: boolean; // still under way (drawn to now)
  outcome: Outcome | "timer" | "waiting";
  attempts: string; // "1", "1-2", "3"
  retried: boolean; // a method with more than one attempt
  error?: string;
  label: string;
}

function methodBars(x: Execution, m: MethodRun, now: number): Bar[] {
  const name = m.method === "WAIT_FOR" ? "WaitFor" : "Execute";
  const end = m.end ?? now;
  const open = m.end === undefined;
  const lf = m.lastFailure;
  const bars: Bar[] = [];
  const retried = m.attempts > 1 || (lf !== undefined && open);
  // The last failure is the method's last attempt (it ended failing, its retries exhausted): one
  // bar of all its attempts, not a split with nothing after it.
  if (lf && !open && lf.attempt >= m.attempts && m.outcome !== "completed") {
    bars.push({
      key: `${x.id}:${name}`,
      kind: "attempt",
      method: name,
      start: m.start,
      end,
      open: false,
      outcome: lf.outcome,
      attempts: lf.attempt > 1 ? `1-${lf.attempt}` : "1",
      retried: lf.attempt > 1,
      error: lf.error || m.error,
      label: lf.attempt > 1 ? `${name}: ${lf.attempt} attempts (the last ${lf.outcome.replace("_", " ")}; no retry left)` : `${name} attempt 1`,
    });
    return bars;
  }
  if (lf && lf.atMs >= m.start && lf.atMs <= end && lf.attempt >= 1) {
    bars.push({
      key: `${x.id}:${name}:failed`,
      kind: "attempt",
      method: name,
      start: m.start,
      end: lf.atMs,
      open: false,
      outcome: lf.outcome,
      attempts: lf.attempt === 1 ? "1" : `1-${lf.attempt}`,
      retried: true,
      error: lf.error,
      label: `${name} attempt ${lf.attempt === 1 ? "1" : `1 to ${lf.attempt}`}`,
    });
    if (m.outcome === "backoff") {
      bars.push({ key: `${x.id}:${name}:backoff`, kind: "backoff", method: name, start: lf.atMs, end, open, outcome: "backoff", attempts: String(m.attempts), retried: true, label: `${name} waits to retry (attempt ${m.attempts} next)` });
      return bars;
    }
    bars.push({
      key: `${x.id}:${name}:last`,
      kind: "attempt",
      method: name,
      start: lf.atMs,
      end,
      open,
      outcome: m.outcome,
      attempts: String(m.attempts),
      retried: true,
      error: m.error,
      label: `${name} attempt ${m.attempts} (after the retry's backoff)`,
    });
    return bars;
  }
  bars.push({
    key: `${x.id}:${name}`,
    kind: "attempt",
    method: name,
    start: m.start,
    end,
    open,
    outcome: m.outcome,
    attempts: m.attempts > 1 ? `1-${m.attempts}` : String(m.attempts || 1),
    retried,
    error: m.error,
    label: m.attempts > 1 ? `${name}: ${m.attempts} attempts (the last ${m.outcome}; the earlier ones failed)` : `${name} attempt ${m.attempts || 1}`,
  });
  return bars;
}

export function executionBars(x: Execution, now: number): Bar[] {
  const bars: Bar[] = [];
  if (x.waitFor) bars.push(...methodBars(x, x.waitFor, now));
  if (x.wait) {
    const end = x.wait.end ?? (x.phase === "waiting" ? now : (x.ended ?? now));
    bars.push({
      key: `${x.id}:wait`,
      kind: "wait",
      method: "wait",
      start: x.wait.start,
      end,
      open: x.wait.end === undefined && x.phase === "waiting",
      outcome: x.wait.timerFired || (x.wait.timer && x.wait.end === undefined) ? "timer" : "waiting",
      attempts: "",
      retried: false,
      label: x.wait.timer ? `Wait with a Timer (${x.wait.label})` : `Wait (${x.wait.label})`,
    });
  }
  if (x.execute) bars.push(...methodBars(x, x.execute, now));
  if (!bars.length && x.phase === "canceled")
    bars.push({ key: `${x.id}:canceled`, kind: "attempt", method: "Execute", start: x.created, end: x.ended ?? x.created, open: false, outcome: "canceled", attempts: "", retried: false, label: "canceled before a method ended" });
  return bars;
}
