// DescribeFlow as a summary: IDs, type, status, times, close reason, the result, the input (a long
// value truncated, with "Show all"), and the related runs (with the SubFlow children the history
// and the state name).
import { Card, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import type { FlowDescription } from "../../api/types";
import { Field } from "../../components/Field";
import { PayloadBlock } from "../../components/JsonBlock";
import { StatusBadge } from "../../components/StatusBadge";
import { formatTime, runDuration } from "../../format";
import { RelatedRuns, type ChildRun } from "./RelatedRuns";
import { useNow } from "../../useNow";

export function RunSummary({ flow, children }: { flow: FlowDescription; children?: ChildRun[] }) {
  const now = useNow(1000, !Number(flow.closeUnixMs));
  return (
    <Card withBorder component="section" aria-labelledby="summary-title" data-testid="run-summary">
      <Stack gap="sm">
        <Title order={2} size="h3" id="summary-title">
          Summary
        </Title>
        <SimpleGrid cols={{ base: 2, md: 4 }} spacing="sm" component="dl" m={0}>
          <Field label="Flow ID" testId="summary-flow-id">{flow.flowId}</Field>
          <Field label="Run ID" testId="summary-run-id">{flow.runId}</Field>
          <Field label="Flow type">{`${flow.flowType} (declaration v${flow.declarationVersion})`}</Field>
          <Field label="Status" testId="summary-status">
            <StatusBadge status={flow.status} />
          </Field>
          <Field label="Start (UTC)">{formatTime(flow.startUnixMs)}</Field>
          <Field label="Close (UTC)">{formatTime(flow.closeUnixMs)}</Field>
          <Field label={Number(flow.closeUnixMs) ? "Duration" : "Running for"}>
            {runDuration(flow.startUnixMs, flow.closeUnixMs, now)}
          </Field>
          <Field label="Close reason">{flow.closeReason}</Field>
          <Field label="Flow attempt">{String(flow.flowAttempt)}</Field>
          <Field label="Runs of this Flow ID">{String(flow.runs)}</Field>
          <Field label="Retry at (UTC)">{formatTime(flow.retryUnixMs)}</Field>
          <Field label="Expires (UTC)">{formatTime(flow.expireUnixMs)}</Field>
        </SimpleGrid>
        <RelatedRuns flow={flow} children={children} />
        <SimpleGrid cols={{ base: 1, md: 2 }} spacing="sm">
          <div>
            <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
              Input
            </Text>
            <PayloadBlock payload={flow.input} empty="(none)" label="Input" />
          </div>
          <div>
            <Text size="xs" c="dimmed" tt="uppercase" fw={600}>
              Outputs
            </Text>
            {flow.outputs.length === 0 && <Text size="sm" c="dimmed">(none yet)</Text>}
            {flow.outputs.map((o) => (
              <div key={o.stepExecutionId}>
                <Text size="sm">{o.stepExecutionId}</Text>
                <PayloadBlock payload={o.output} label={`Output of ${o.stepExecutionId}`} />
              </div>
            ))}
          </div>
        </SimpleGrid>
      </Stack>
    </Card>
  );
}
