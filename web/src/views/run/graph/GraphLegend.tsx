// The Step graph's legend: what each phase's color means.
import { Group, Text } from "@mantine/core";
import { phaseFill, phaseStroke } from "./phaseColors";

const phases = ["running", "waiting", "done", "failed", "canceled", "source"] as const;

export function GraphLegend() {
  return (
    <Group gap="md" mt={6} aria-label="Legend of the Step graph">
      {phases.map((p) => (
        <Group gap={4} key={p}>
          <span
            aria-hidden
            style={{ display: "inline-block", width: 14, height: 12, borderRadius: 3, background: phaseFill[p], border: `1.5px solid ${phaseStroke[p]}` }}
          />
          <Text size="xs">{p === "source" ? "RPC or other source" : p}</Text>
        </Group>
      ))}
      <Text size="xs">↻ a loop's executions, grouped</Text>
    </Group>
  );
}
