// Run (`/flows/:flowId/runs/:runId`): the run's summary, its Step graph and timeline, its current
// state and its history; while the run runs, new history events are appended as they happen (and
// the summary and state are read again with them).
//
// The three reads (DescribeFlow, GetFlowState, the whole history) go out at once, before the app
// renders when it opens on a run's URL (runCalls.ts); the summary shows first, the graph when its
// layout arrives, and the state's tables and the history's rows once the graph is drawn (deferred
// renders React interrupts for it), each only when its own data changed.

// First: its module starts the layout Worker, the page's longest start, when the app opens on a run.
import { preloadElk } from "./graph/useElkLayout";
import { memo, useCallback, useDeferredValue, useEffect, useMemo, useState } from "react";
import { useParams } from "react-router";
import { Button, Group, Loader, Stack, Text, Title } from "@mantine/core";
import { describeFlow, getFlowState } from "../../api/calls";
import { useApi } from "../../useApi";
import { ErrorAlert } from "../../components/ErrorAlert";
import { RunSummary } from "./RunSummary";
import { FlowStateView } from "./FlowStateView";
import { HistoryList } from "./HistoryList";
import { useHistory } from "./useHistory";
import { RunGraphs } from "./graph/RunGraphs";
import { RunActions } from "./actions/RunActions";
import { takeEarly } from "./runCalls";
import { childRuns } from "./RelatedRuns";
import type { GetFlowStateResponse } from "../../api/types";

const StateView = memo(FlowStateView);
const Summary = memo(RunSummary);
const graphWaitMs = 1500;

export function RunPage() {
  const params = useParams();
  const flowId = params.flowId ?? "";
  const runId = params.runId ?? "";
  // A new run (a link to a related run) starts from nothing: no state of the last run carries over.
  return <RunView key={`${flowId}\u0000${runId}`} flowId={flowId} runId={runId} />;
}

function RunView({ flowId, runId }: { flowId: string; runId: string }) {
  useEffect(preloadElk, []);
  const describe = useApi(
    (signal) => takeEarly("describe", flowId, runId) ?? describeFlow({ flowId, runId }, signal),
    [flowId, runId],
  );
  const state = useApi(
    (signal) => takeEarly("state", flowId, runId) ?? getFlowState({ flowId, runId }, signal),
    [flowId, runId],
  );
  const stateShown = useDeferredValue<GetFlowStateResponse | undefined>(state.data);
  const running = describe.data?.status === "FLOW_RUNNING";
  const found = describe.data !== undefined; // once found, a later failed re-read keeps what was shown
  const { reload: reloadDescribe } = describe;
  const { reload: reloadState } = state;
  const reloadAll = useCallback(() => {
    reloadDescribe();
    reloadState();
  }, [reloadDescribe, reloadState]);
  const history = useHistory(flowId, runId, running, reloadAll);
  const children = useMemo(() => childRuns(history.events, state.data), [history.events, state.data]);
  // The state's tables and the history's rows are drawn once the graph is (or could not be), so
  // that the layout Worker, starting, has the CPU: on a small machine it is what the page waits
  // for. At most `graphWaitMs` after the history arrived.
  const [graphDrawn, setGraphDrawn] = useState(false);
  const onGraphDrawn = useCallback(() => setGraphDrawn(true), []);
  useEffect(() => {
    if (!history.loaded) return;
    const t = setTimeout(onGraphDrawn, graphWaitMs);
    return () => clearTimeout(t);
  }, [history.loaded, onGraphDrawn]);
  const settled = useDeferredValue(graphDrawn || history.error !== undefined);

  return (
    <Stack gap="md">
      <Group justify="space-between">
        <div>
          <Title order={1} size="h2">
            Run of {flowId}
          </Title>
          <Text size="sm" c="dimmed" ff="monospace">
            {runId}
          </Text>
        </div>
        <Group gap="xs">
          {describe.data && <RunActions flow={describe.data} state={state.data} onDone={reloadAll} />}
        <Button variant="default" size="xs" onClick={reloadAll} loading={describe.loading || state.loading}>
          Refresh
        </Button>
        </Group>
      </Group>
      {describe.error !== undefined && <ErrorAlert error={describe.error} title="DescribeFlow failed" onRetry={reloadAll} />}
      {describe.data === undefined && describe.error === undefined && <Loader aria-label="Loading the run" />}
      {describe.data && <Summary flow={describe.data} children={children} />}
      {/* State and history show once DescribeFlow found the run (all three are read at once): a
          run it cannot find has neither, and its one error above says why. */}
      {found && state.error !== undefined && (
        <ErrorAlert error={state.error} title="GetFlowState failed" onRetry={reloadAll} />
      )}
      <RunGraphs
        events={history.events}
        loaded={history.loaded}
        more={history.more}
        historyError={history.error}
        state={state.data}
        show={found}
        onDrawn={onGraphDrawn}
      />
      {/* The state's tables and the history's rows come after the graph (above). */}
      {found && settled && stateShown && <StateView state={stateShown} running={running} />}
      {found && settled && <HistoryList history={history} />}
    </Stack>
  );
}
