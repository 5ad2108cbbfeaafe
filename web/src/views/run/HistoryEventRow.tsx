// One history event: its seq, time, kind, execution and a summary; the button expands its JSON.
import { useState } from "react";
import { Button, Table, Text } from "@mantine/core";
import type { HistoryEvent } from "../../api/types";
import { JsonBlock } from "../../components/JsonBlock";
import { formatTime } from "../../format";
import { eventSummary } from "./eventSummary";

export function HistoryEventRow({ event }: { event: HistoryEvent }) {
  const [open, setOpen] = useState(false);
  const detailId = `event-${event.seq}-json`;
  return (
    <>
      <Table.Tr data-testid="history-event" data-kind={event.kind}>
        <Table.Td>{event.seq}</Table.Td>
        <Table.Td>{formatTime(event.atMs)}</Table.Td>
        <Table.Td>
          <Text size="sm" ff="monospace">
            {event.kind}
          </Text>
        </Table.Td>
        <Table.Td>{event.stepExecutionId}</Table.Td>
        <Table.Td>
          <Text size="sm">{eventSummary(event)}</Text>
        </Table.Td>
        <Table.Td>
          <Button
            size="compact-xs"
            variant="subtle"
            aria-expanded={open}
            aria-controls={detailId}
            aria-label={`${open ? "Hide" : "Show"} the JSON of event ${event.seq}`}
            onClick={() => setOpen((o) => !o)}
          >
            {open ? "Hide JSON" : "JSON"}
          </Button>
        </Table.Td>
      </Table.Tr>
      {open && (
        <Table.Tr id={detailId}>
          <Table.Td colSpan={6}>
            <JsonBlock value={event} label={`Event ${event.seq} as JSON`} />
          </Table.Td>
        </Table.Tr>
      )}
    </>
  );
}
