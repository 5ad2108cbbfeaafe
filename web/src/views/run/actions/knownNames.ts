// Names the run's state already shows, offered in the actions' inputs (free text stays allowed):
// the Channels of its queues and of its waiting conditions, its Attribute keys, its Step types and
// executions.
import type { GetFlowStateResponse, StepExecutionView } from "../../../api/types";

const unique = (xs: string[]) => [...new Set(xs.filter((x) => x !== ""))].sort();

function executions(state: GetFlowStateResponse | undefined): StepExecutionView[] {
  if (!state) return [];
  return [...state.active, ...(state.timeoutHandler ? [state.timeoutHandler] : []), ...state.ended];
}

/** Channel names, and the instance keys seen for each. */
export function knownChannels(state: GetFlowStateResponse | undefined): Map<string, string[]> {
  const m = new Map<string, Set<string>>();
  const add = (channel: string, instanceKey: string) => {
    if (!channel) return;
    if (!m.has(channel)) m.set(channel, new Set());
    if (instanceKey) m.get(channel)!.add(instanceKey);
  };
  for (const q of state?.queues ?? []) add(q.channel, q.instanceKey);
  for (const s of state?.active ?? [])
    for (const c of s.conditions) if (c.condition?.channel) add(c.condition.channel.channel, c.condition.channel.instanceKey);
  return new Map([...m].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, unique([...v])]));
}

export const knownAttributeKeys = (state: GetFlowStateResponse | undefined) =>
  unique((state?.attributes ?? []).map((a) => a.attribute?.key ?? ""));

export const knownStepTypes = (state: GetFlowStateResponse | undefined) =>
  unique(executions(state).map((s) => s.stepType));

export const knownExecutionIds = (state: GetFlowStateResponse | undefined) =>
  unique(executions(state).map((s) => s.stepExecutionId));
