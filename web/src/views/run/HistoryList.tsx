// The run's history, oldest first, with a live indicator while new events are being followed.
import { Badge, Button, Group, Table, Title, VisuallyHidden } from "@mantine/core";
import { ErrorAlert } from "../../components/ErrorAlert";
import { HistoryEventRow } from "./HistoryEventRow";
import type { History } from "./useHistory";

function LiveBadge({ live }: { live: History["live"] }) {
  if (live === "live")
    return (
      <Badge color="teal" variant="dot" data-testid="live-badge">
        live: new events appear as they happen
      </Badge>
    );
  if (live === "retrying")
    return (
      <Badge color="yellow" variant="dot" data-testid="live-badge">
        reconnecting
      </Badge>
    );
  return null;
}

export function HistoryList({ history }: { history: History }) {
  return (
    <section aria-labelledby="history-title">
      <Group justify="space-between" mb="xs">
        <Title order={2} size="h3" id="history-title">
          History
        </Title>
        <LiveBadge live={history.live} />
      </Group>
      {history.error !== undefined && <ErrorAlert error={history.error} title="The history could not be read" />}
      <Table.ScrollContainer minWidth={800}>
        <Table striped aria-labelledby="history-title" aria-busy={history.loading} data-testid="history">
          <Table.Thead>
            <Table.Tr>
              <Table.Th scope="col">Seq</Table.Th>
              <Table.Th scope="col">Time (UTC)</Table.Th>
              <Table.Th scope="col">Kind</Table.Th>
              <Table.Th scope="col">Execution</Table.Th>
              <Table.Th scope="col">What</Table.Th>
              <Table.Th scope="col">
                <VisuallyHidden>Details</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody aria-live="polite" aria-relevant="additions">
            {history.events.map((e) => (
              <HistoryEventRow key={e.seq} event={e} />
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {history.more && (
        <Button size="xs" variant="default" onClick={history.loadMore} loading={history.loading}>
          Load more events
        </Button>
      )}
    </section>
  );
}
