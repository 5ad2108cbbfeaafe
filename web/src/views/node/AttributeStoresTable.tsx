// Where each configured Attribute Store's sync stands (docs/attribute-store.md).
import { Table, Text } from "@mantine/core";
import type { AttributeStoreStatus } from "../../api/types";

export function AttributeStoresTable({ stores }: { stores: AttributeStoreStatus[] }) {
  if (stores.length === 0) return <Text size="sm" c="dimmed">None configured.</Text>;
  return (
    <Table.ScrollContainer minWidth={800}>
      <Table striped aria-label="Attribute Stores">
        <Table.Thead>
          <Table.Tr>
            {["Name", "Type", "Table", "State", "Watermark slot", "Lag (slots)", "Lag (s)", "Rows", "Failures", "Last error"].map((h) => (
              <Table.Th scope="col" key={h}>
                {h}
              </Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {stores.map((s) => (
            <Table.Tr key={s.name}>
              <Table.Td>{s.name}</Table.Td>
              <Table.Td>{s.type}</Table.Td>
              <Table.Td>{s.table}</Table.Td>
              <Table.Td>{s.state}</Table.Td>
              <Table.Td>{s.watermarkSlot}</Table.Td>
              <Table.Td>{s.lagSlots}</Table.Td>
              <Table.Td>{s.lagSeconds.toFixed(1)}</Table.Td>
              <Table.Td>{s.rows}</Table.Td>
              <Table.Td>{s.failures}</Table.Td>
              <Table.Td>{s.lastError}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
