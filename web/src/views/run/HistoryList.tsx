// The run's history, oldest first, 100 events a page ("Load more events" shows the next 100, and
// reads them from the server past what the page read at first), with a live indicator while new
// events are being followed. Once every event held is shown, new ones show as they arrive. The
// rows are drawn after the rest of the page (a deferred render React interrupts for the graph),
// and a row already drawn is not drawn again when events are appended.
import { memo, useDeferredValue, useEffect, useState } from "react";
import { Badge, Button, Group, Table, Text, Title, VisuallyHidden } from "@mantine/core";
import type { HistoryEvent } from "../../api/types";
import { ErrorAlert } from "../../components/ErrorAlert";
import { HistoryEventRow } from "./HistoryEventRow";
import type { History } from "./useHistory";

export const historyPage = 100;

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

const Rows = memo(function Rows({ events }: { events: HistoryEvent[] }) {
  return events.map((e) => <HistoryEventRow key={e.seq} event={e} />);
});

/**
 * The rows in pages of 100: each page a memoized block, so an event appended re-renders only the
 * last page.
 */
function Pages({ events }: { events: HistoryEvent[] }) {
  const pages: HistoryEvent[][] = [];
  for (let i = 0; i < events.length; i += historyPage) pages.push(events.slice(i, i + historyPage));
  return pages.map((p) => <StablePage key={p[0].seq} events={p} />);
}

/** A page's block: re-rendered only when its own events changed (not when an array was sliced anew). */
const StablePage = memo(
  function StablePage({ events }: { events: HistoryEvent[] }) {
    return <Rows events={events} />;
  },
  (a, b) => a.events.length === b.events.length && a.events.every((e, i) => e === b.events[i]),
);

export function HistoryList({ history }: { history: History }) {
  // How many events are shown, or "all" once the list caught up with what is held (then new events
  // show as they come). The list is drawn once the first read answered.
  const [limit, setLimit] = useState<number | "all">(() =>
    history.events.length <= historyPage && !history.more ? "all" : historyPage,
  );
  const events = useDeferredValue(history.events);
  const shown = limit === "all" ? events : events.slice(0, limit);
  const canShowMore = limit !== "all" || history.more;
  const showMore = () => {
    const next = (limit === "all" ? history.events.length : limit) + historyPage;
    if (next > history.events.length && history.more) history.loadMore();
    setLimit(next >= history.events.length && !history.more ? "all" : next);
  };
  // After a read past the cap: "all" once it caught up.
  useEffect(() => {
    if (typeof limit === "number" && limit >= history.events.length && !history.more) setLimit("all");
  }, [limit, history.events.length, history.more]);
  const drawing = events !== history.events;
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
        <Table striped aria-labelledby="history-title" aria-busy={history.loading || drawing} data-testid="history">
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
            <Pages events={shown} />
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {canShowMore && (
        <Group gap="sm" mt="xs">
          <Button size="xs" variant="default" onClick={showMore} loading={history.loading}>
            Load more events
          </Button>
          <Text size="xs" c="dimmed">
            {shown.length} of {history.more ? `more than ${events.length}` : events.length} events shown
          </Text>
        </Group>
      )}
    </section>
  );
}
