// What the Step graph and the timeline draw: the run's history as the Run page read it (shared with
// the history list: the whole history, at most `maxEvents`, and each new event the live poll
// appends) with the Run page's own GetFlowState answer (the phases now, the parents, the last
// failures).
import { useMemo } from "react";
import type { GetFlowStateResponse, HistoryEvent } from "../../../api/types";
import { buildRunModel, type RunModel } from "./runModel";

export { maxEvents } from "../runCalls";

export function useRunModel(
  events: HistoryEvent[],
  loaded: boolean,
  truncated: boolean,
  state: GetFlowStateResponse | undefined,
): RunModel | undefined {
  return useMemo(() => {
    if (!loaded) return undefined;
    const m = buildRunModel(events, state, truncated);
    performance.mark("dex-run:model");
    return m;
  }, [events, loaded, state, truncated]);
}
