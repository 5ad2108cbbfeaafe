// Every Attribute (and AttributeMap instance) of the run, with its type and value.
import { Table, Text } from "@mantine/core";
import type { AttributeView } from "../../api/types";
import { attributeValueText, attributeValueType } from "../../format";

export function AttributesTable({ attributes }: { attributes: AttributeView[] }) {
  if (attributes.length === 0) return <Text size="sm" c="dimmed">No Attribute has a value.</Text>;
  return (
    <Table striped aria-label="Attributes" data-testid="attributes">
      <Table.Thead>
        <Table.Tr>
          <Table.Th scope="col">Key</Table.Th>
          <Table.Th scope="col">Instance</Table.Th>
          <Table.Th scope="col">Type</Table.Th>
          <Table.Th scope="col">Value</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {attributes.map((a, i) => (
          <Table.Tr key={`${a.attribute?.key}/${a.attribute?.instanceKey}/${i}`} data-testid="attribute-row">
            <Table.Td>{a.attribute?.key}</Table.Td>
            <Table.Td>{a.attribute?.instanceKey}</Table.Td>
            <Table.Td>{attributeValueType(a.attribute?.value)}</Table.Td>
            <Table.Td>
              <Text size="sm" ff="monospace" style={{ whiteSpace: "pre-wrap" }}>
                {Number(a.omittedBytes) > 0
                  ? `(${a.omittedBytes} bytes, left out)`
                  : attributeValueText(a.attribute?.value)}
              </Text>
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
