// The timeline's legend: the outcomes' colors, the wait and the Timer's wait.
import { Group, Text } from "@mantine/core";
import { outcomeFill, outcomeName } from "../graph/phaseColors";

const shown = ["completed", "failed", "timed_out", "not_completed", "running", "queued", "backoff", "canceled"] as const;

export function TimelineLegend() {
  return (
    <Group gap="md" mt={6} aria-label="Legend of the timeline">
      {shown.map((o) => (
        <Group gap={4} key={o}>
          <span aria-hidden style={{ display: "inline-block", width: 14, height: 10, background: outcomeFill[o] }} />
          <Text size="xs">{outcomeName[o]}</Text>
        </Group>
      ))}
      <Group gap={4}>
        <span aria-hidden style={{ display: "inline-block", width: 14, height: 5, background: "#fff3bf", border: "1px solid #a06d00" }} />
        <Text size="xs">waiting for conditions</Text>
      </Group>
      <Group gap={4}>
        <span
          aria-hidden
          style={{ display: "inline-block", width: 14, height: 6, border: "1px solid #a06d00", background: "repeating-linear-gradient(45deg, #e67700 0 2px, #fff3bf 2px 5px)" }}
        />
        <Text size="xs">waiting on a Timer</Text>
      </Group>
    </Group>
  );
}
