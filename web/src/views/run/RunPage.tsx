// Run (`/flows/:flowId/runs/:runId`): the run's summary, its current state and its history; while
// the run runs, new history events are appended as they happen (and the summary and state are
// read again with them).
import { useCallback } from "react";
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

export function RunPage() {
  const params = useParams();
  const flowId = params.flowId ?? "";
  const runId = params.runId ?? "";
  // A new run (a link to a related run) starts from nothing: no state of the last run carries over.
  return <RunView key={`${flowId}\u0000${runId}`} flowId={flowId} runId={runId} />;
}

function RunView({ flowId, runId }: { flowId: string; runId: string }) {
  const describe = useApi((signal) => describeFlow({ flowId, runId }, signal), [flowId, runId]);
  const state = useApi((signal) => getFlowState({ flowId, runId }, signal), [flowId, runId]);
  const running = describe.data?.status === "FLOW_RUNNING";
  const found = describe.data !== undefined; // once found, a later failed re-read keeps what was shown
  const { reload: reloadDescribe } = describe;
  const { reload: reloadState } = state;
  const reloadAll = useCallback(() => {
    reloadDescribe();
    reloadState();
  }, [reloadDescribe, reloadState]);
  const history = useHistory(flowId, runId, running, reloadAll);

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
      {describe.data && <RunSummary flow={describe.data} />}
      {/* State and history show once DescribeFlow found the run (all three are read at once): a
          run it cannot find has neither, and its one error above says why. */}
      {found && state.error !== undefined && (
        <ErrorAlert error={state.error} title="GetFlowState failed" onRetry={reloadAll} />
      )}
      <RunGraphs flowId={flowId} runId={runId} state={state.data} show={found} />
      {found && state.data && <FlowStateView state={state.data} running={running} />}
      {found && <HistoryList history={history} />}
    </Stack>
  );
}
