// The colors of the Step graph's phases and the timeline's outcomes (with dark text, WCAG AA on
// each fill), and their names as the legends and labels say them.
import type { Outcome, Phase } from "./runModel";

export const phaseFill: Record<Phase | "source", string> = {
  running: "#a5d8ff",
  waiting: "#ffe8a3",
  done: "#b2f2bb",
  failed: "#ffc9c9",
  canceled: "#dee2e6",
  source: "#e5dbff",
};

export const phaseStroke: Record<Phase | "source", string> = {
  running: "#1864ab",
  waiting: "#a06d00",
  done: "#2b8a3e",
  failed: "#c92a2a",
  canceled: "#495057",
  source: "#6741d9",
};

export const outcomeFill: Record<Outcome, string> = {
  completed: "#40c057",
  failed: "#fa5252",
  timed_out: "#e8590c",
  not_completed: "#be4bdb",
  running: "#228be6",
  queued: "#74c0fc",
  backoff: "#ffa8a8",
  canceled: "#adb5bd",
};

export const outcomeName: Record<Outcome, string> = {
  completed: "completed",
  failed: "failed",
  timed_out: "timed out",
  not_completed: "NOT_COMPLETED",
  running: "running",
  queued: "queued",
  backoff: "waiting for its retry",
  canceled: "canceled",
};
