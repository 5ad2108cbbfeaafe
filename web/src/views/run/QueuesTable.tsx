// The Channel queues that hold messages, with their oldest messages (a long one truncated, with
// "Show all"; one GetFlowState left out, past its answer's budget, with its size).
import { Table, Text } from "@mantine/core";
import type { ChannelQueueView } from "../../api/types";
import { PayloadText, sizeText } from "../../components/JsonBlock";
import "./run.css";

const td = Table.classes.td;

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
            <Table.Tr key={`${q.channel}/${q.instanceKey}`} data-testid="queue-row">
              <td className={td}>{q.channel}</td>
              <td className={td}>{q.instanceKey}</td>
              <td className={td}>{q.count}</td>
              <td className={td}>
                {q.messages.map((m) => (
                  <div key={m.seq} className="dex-line dex-mono">
                    #{m.seq}:{" "}
                    {Number(m.omittedBytes) > 0 ? (
                      `(${sizeText(Number(m.omittedBytes))}, left out of the state's answer)`
                    ) : (
                      <PayloadText payload={m.message} size="xs" label={`message ${m.seq} of Channel ${q.channel}`} />
                    )}
                  </div>
                ))}
              </td>
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
