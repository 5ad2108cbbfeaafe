// The Step graph as text: one row per execution (type, phase, what started it, what it started).
import { Button, Table } from "@mantine/core";
import type { RunModel } from "./runModel";
import type { GraphView } from "./graphView";
import { sourceLabel } from "./graphView";

export function GraphTable({ model, view, onSelect }: { model: RunModel; view: GraphView; onSelect: (id: string) => void }) {
  return (
    <Table.ScrollContainer minWidth={700} mah={420}>
      <Table striped aria-label="Step executions: who started whom" data-testid="graph-table" data-nodes={view.nodes.length}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Execution</Table.Th>
            <Table.Th scope="col">Step type</Table.Th>
            <Table.Th scope="col">Phase</Table.Th>
            <Table.Th scope="col">Started by</Table.Th>
            <Table.Th scope="col">Started</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {model.executions.map((x) => (
            <Table.Tr key={x.id} data-testid="graph-table-row">
              <Table.Td>
                <Button size="compact-xs" variant="subtle" onClick={() => onSelect(x.id)} aria-label={`Select ${x.id}`}>
                  {x.id}
                </Button>
              </Table.Td>
              <Table.Td>{x.type}</Table.Td>
              <Table.Td>{x.phase}</Table.Td>
              <Table.Td>{x.parent === "" ? "the run's start" : sourceLabel(x.parent)}</Table.Td>
              <Table.Td>{(model.children.get(x.id) ?? []).join(", ")}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
