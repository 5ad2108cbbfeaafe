// GetFlowState: the active Step executions (and the timeout handler), the Workers hosting the
// type, the Channel queues, the Attributes, the effective FlowConfig and the executions that ended.
import { Card, Stack, Text, Title } from "@mantine/core";
import type { GetFlowStateResponse } from "../../api/types";
import { JsonBlock } from "../../components/JsonBlock";
import { StepsTable } from "./StepsTable";
import { QueuesTable } from "./QueuesTable";
import { AttributesTable } from "./AttributesTable";

function Section({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <div>
      <Title order={3} size="h5" mb={4}>
        {title}
      </Title>
      {children}
    </div>
  );
}

export function FlowStateView({ state, running }: { state: GetFlowStateResponse; running: boolean }) {
  const active = state.timeoutHandler ? [...state.active, state.timeoutHandler] : state.active;
  return (
    <Card withBorder component="section" aria-labelledby="state-title" data-testid="flow-state">
      <Stack gap="md">
        <Title order={2} size="h3" id="state-title">
          Current state
        </Title>
        <Section title="Active Steps">
          <StepsTable steps={active} label="Active Step executions" testId="active-steps" />
          {running && (
            <Text size="xs" c={state.workers.length ? "dimmed" : "orange"} mt={4}>
              {state.workers.length
                ? `Workers hosting this Flow type: ${state.workers.join(", ")}`
                : "No Worker connected to this process hosts this Flow type: queued tasks wait."}
            </Text>
          )}
        </Section>
        <Section title="Channel queues">
          <QueuesTable queues={state.queues} omitted={state.queuesOmitted} />
        </Section>
        <Section title="Attributes">
          <AttributesTable attributes={state.attributes} flow={{ flowId: state.flow?.flowId ?? "", runId: state.flow?.runId ?? "" }} />
        </Section>
        <Section title={`Ended Steps (${state.endedCount})`}>
          <StepsTable steps={state.ended} label="Ended Step executions" testId="ended-steps" />
        </Section>
        <Section title="FlowConfig">
          <JsonBlock value={state.config ?? {}} label="The run's effective FlowConfig" />
        </Section>
      </Stack>
    </Card>
  );
}
