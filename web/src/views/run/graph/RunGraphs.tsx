// The Run page's Step graph and timeline (issue 29): both drawn from the run's history as the page
// read it (at most 5,000 events, shared with the history list) and its state, sharing one selected
// execution, whose details show below the graph. `state`: the Run page's GetFlowState answer, read
// again as new events arrive. Shown once `show` says the run exists (DescribeFlow found it): a run
// it cannot find has one error, the Run page's.
import { memo, useEffect, useState } from "react";
import type { GetFlowStateResponse } from "../../../api/types";
import type { History } from "../useHistory";
import { Alert, Card, Loader, Stack, Text, Title } from "@mantine/core";
import { useNow } from "../../../useNow";
import { maxEvents, useRunModel } from "./useRunModel";
import { StepGraph } from "./StepGraph";
import { ExecutionDetails } from "./ExecutionDetails";
import { Timeline } from "../timeline/Timeline";
import "./graph.css";

export const RunGraphs = memo(function RunGraphs({
  events,
  loaded,
  more,
  historyError,
  state,
  show,
  onDrawn,
}: {
  events: History["events"];
  loaded: boolean;
  more: boolean;
  historyError: unknown;
  state: GetFlowStateResponse | undefined;
  show: boolean;
  /** Told once the graph is drawn, or there is none to draw (no execution, or no history). */
  onDrawn?: () => void;
}) {
  const model = useRunModel(events, loaded, more, state);
  const error = model === undefined ? historyError : undefined;
  const [sel, setSel] = useState<{ id: string; group?: string[] }>();
  const running = model !== undefined && model.runEnd === undefined;
  const now = useNow(1000, running);
  const select = (id: string | undefined, group?: string[]) => setSel(id ? { id, group } : undefined);
  const nothing = error !== undefined || (model !== undefined && model.executions.length === 0);
  useEffect(() => {
    if (nothing) onDrawn?.();
  }, [nothing, onDrawn]);
  if (!show) return null;

  return (
    <>
      <Card withBorder component="section" aria-labelledby="graph-title" data-testid="graph-section">
        <Stack gap="sm">
          <Title order={2} size="h3" id="graph-title">
            Step graph
          </Title>
          {error !== undefined && (
            <Text size="sm" c="red.9">
              The history could not be read (see History below).
            </Text>
          )}
          {!model && error === undefined && <Loader aria-label="Loading the Step graph" />}
          {model?.truncated && (
            <Alert color="yellow" data-testid="graph-truncated">
              The history has more than {maxEvents.toLocaleString("en")} events: the graph and the timeline show its first{" "}
              {model.eventCount.toLocaleString("en")}.
            </Alert>
          )}
          {model && model.executions.length === 0 && <Text size="sm">No Step execution yet.</Text>}
          {model && model.executions.length > 0 && (
            <>
              <Text size="sm" c="dimmed">
                {model.executions.length} Step executions from {model.eventCount} history events. Select a node (click, or
                Tab and Enter) for its details.
              </Text>
              <StepGraph model={model} stateRead={state !== undefined} selected={sel?.id} onSelect={select} onDrawn={onDrawn} />
              {sel && <ExecutionDetails model={model} id={sel.id} group={sel.group} onSelect={select} />}
            </>
          )}
        </Stack>
      </Card>
      <Card withBorder component="section" aria-labelledby="timeline-title" data-testid="timeline-section">
        <Stack gap="sm">
          <Title order={2} size="h3" id="timeline-title">
            Timeline
          </Title>
          {!model && error === undefined && <Loader aria-label="Loading the timeline" />}
          {model && model.executions.length > 0 && (
            <Timeline model={model} selected={sel?.id} onSelect={(id) => select(id)} now={now} />
          )}
        </Stack>
      </Card>
    </>
  );
});
