// A time travel's dry run: the new run as it would start (its description, active Step executions,
// the timeout handler if it would run, Channel queues) and its Attributes.
import { Code, Stack, Text, Title } from "@mantine/core";
import type { TimeTravelResponse } from "../../../api/types";
import { StepsTable } from "../StepsTable";
import { QueuesTable } from "../QueuesTable";
import { AttributesTable } from "../AttributesTable";

export function TimeTravelPreview({ preview }: { preview: TimeTravelResponse }) {
  const start = preview.start;
  const active = start ? (start.timeoutHandler ? [...start.active, start.timeoutHandler] : start.active) : [];
  return (
    <Stack gap="xs" data-testid="time-travel-preview" aria-labelledby="time-travel-preview-title" component="section">
      <Title order={3} size="h5" id="time-travel-preview-title">
        Preview: the new run would start with
      </Title>
      {start?.flow && (
        <Text size="sm">
          {start.flow.flowType} (declaration version {start.flow.declarationVersion}), from run{" "}
          <Code>{start.flow.traveledFromRunId}</Code>
        </Text>
      )}
      <Title order={4} size="h6">
        Active Steps
      </Title>
      <StepsTable steps={active} label="The new run's active Step executions" testId="preview-steps" />
      <Title order={4} size="h6">
        Attributes
      </Title>
      <AttributesTable attributes={preview.attributes.map((attribute) => ({ attribute, omittedBytes: "0" }))} />
      <Title order={4} size="h6">
        Channel queues
      </Title>
      <QueuesTable queues={start?.queues ?? []} omitted={start?.queuesOmitted ?? "0"} />
    </Stack>
  );
}
