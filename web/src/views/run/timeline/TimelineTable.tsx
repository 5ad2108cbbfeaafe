// The timeline as text: a row per bar (execution, what, outcome, attempts, start, duration, error).
import { Button, Table } from "@mantine/core";
import type { Execution } from "../graph/runModel";
import { outcomeName } from "../graph/phaseColors";
import { formatDuration, formatTime } from "../../../format";
import type { Bar } from "./bars";

export function TimelineTable({
  rows,
  runStart,
  onSelect,
}: {
  rows: { x: Execution; bars: Bar[] }[];
  runStart: number;
  onSelect: (id: string) => void;
}) {
  return (
    <Table.ScrollContainer minWidth={800} mah={440}>
      <Table striped aria-label="Timeline: the attempts and waits of each Step execution" data-testid="timeline-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Execution</Table.Th>
            <Table.Th scope="col">What</Table.Th>
            <Table.Th scope="col">Outcome</Table.Th>
            <Table.Th scope="col">Start (UTC)</Table.Th>
            <Table.Th scope="col">After the start</Table.Th>
            <Table.Th scope="col">Duration</Table.Th>
            <Table.Th scope="col">Error</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.flatMap(({ x, bars }) =>
            bars.map((b) => (
              <Table.Tr key={b.key} data-testid="timeline-table-row">
                <Table.Td>
                  <Button size="compact-xs" variant="subtle" onClick={() => onSelect(x.id)} aria-label={`Select ${x.id}`}>
                    {x.id}
                  </Button>
                </Table.Td>
                <Table.Td>{b.label}</Table.Td>
                <Table.Td>{b.kind === "wait" ? (b.outcome === "timer" ? "Timer" : "waiting") : (outcomeName[b.outcome as keyof typeof outcomeName] ?? b.outcome)}</Table.Td>
                <Table.Td>{formatTime(b.start)}</Table.Td>
                <Table.Td>+{formatDuration(b.start - runStart)}</Table.Td>
                <Table.Td>{b.open ? `${formatDuration(b.end - b.start)} so far` : formatDuration(b.end - b.start)}</Table.Td>
                <Table.Td>{b.error ?? ""}</Table.Td>
              </Table.Tr>
            )),
          )}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
