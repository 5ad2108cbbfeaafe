// The Channel queues that hold messages, with their oldest messages.
import { Table, Text } from "@mantine/core";
import type { ChannelQueueView } from "../../api/types";
import { payloadText } from "../../format";

export function QueuesTable({ queues, omitted }: { queues: ChannelQueueView[]; omitted: string }) {
  if (queues.length === 0) return <Text size="sm" c="dimmed">No Channel holds a message.</Text>;
  return (
    <>
      <Table striped aria-label="Channel queues" data-testid="queues">
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Channel</Table.Th>
            <Table.Th scope="col">Instance</Table.Th>
            <Table.Th scope="col">Queued</Table.Th>
            <Table.Th scope="col">Oldest messages</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {queues.map((q) => (
            <Table.Tr key={`${q.channel}/${q.instanceKey}`}>
              <Table.Td>{q.channel}</Table.Td>
              <Table.Td>{q.instanceKey}</Table.Td>
              <Table.Td>{q.count}</Table.Td>
              <Table.Td>
                {q.messages.map((m) => (
                  <Text size="xs" ff="monospace" key={m.seq}>
                    #{m.seq}: {Number(m.omittedBytes) > 0 ? `(${m.omittedBytes} bytes, left out)` : payloadText(m.message)}
                  </Text>
                ))}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      {Number(omitted) > 0 && (
        <Text size="xs" c="dimmed">
          {omitted} more queue(s) not shown.
        </Text>
      )}
    </>
  );
}
