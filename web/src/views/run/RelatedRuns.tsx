// Links from a run to the runs around it: its Flow retry's previous and next run, the run it
// continues, the runs time travel made from or to it, and its SubFlow parents.
import { Anchor, Group, Text } from "@mantine/core";
import { Link } from "react-router";
import type { FlowDescription } from "../../api/types";
import { runPath } from "../../format";

export function RelatedRuns({ flow }: { flow: FlowDescription }) {
  const links: { label: string; flowId: string; runId: string }[] = [];
  const same = (label: string, runId: string) => {
    if (runId) links.push({ label, flowId: flow.flowId, runId });
  };
  same("previous run", flow.previousRunId);
  same("next run", flow.nextRunId);
  same("continued from", flow.continuedFromRunId);
  same("traveled from", flow.traveledFromRunId);
  same("traveled to", flow.traveledToRunId);
  for (const p of flow.parents) links.push({ label: `parent (${p.stepExecutionId})`, flowId: p.flowId, runId: p.runId });
  if (links.length === 0) return <Text size="sm" c="dimmed">No related runs.</Text>;
  return (
    <Group gap="md" component="ul" style={{ listStyle: "none", padding: 0, margin: 0 }} aria-label="Related runs">
      {links.map((l) => (
        <li key={`${l.label}:${l.flowId}:${l.runId}`}>
          <Text size="sm" span c="dimmed">
            {l.label}:{" "}
          </Text>
          <Anchor component={Link} to={runPath(l.flowId, l.runId)} size="sm">
            {l.flowId === flow.flowId ? l.runId : `${l.flowId} / ${l.runId}`}
          </Anchor>
        </li>
      ))}
    </Group>
  );
}
