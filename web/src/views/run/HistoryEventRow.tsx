// One history event: its seq, time, kind, execution and a summary; the button expands its JSON (a
// long one truncated, with "Show all"). Plain cells (Mantine's table classes), memoized: a page of
// hundreds of events draws fast, and an appended event does not draw the others again.
import { memo, useState } from "react";
import { Table } from "@mantine/core";
import type { HistoryEvent } from "../../api/types";
import { JsonBlock } from "../../components/JsonBlock";
import { formatTime } from "../../format";
import { eventSummary } from "./eventSummary";
import "./run.css";

const td = Table.classes.td;
const summaryMax = 300; // characters of the summary line (an error's whole text is in the JSON)

export const HistoryEventRow = memo(function HistoryEventRow({ event }: { event: HistoryEvent }) {
  const [open, setOpen] = useState(false);
  const detailId = `event-${event.seq}-json`;
  const summary = eventSummary(event);
  return (
    <>
      <Table.Tr data-testid="history-event" data-kind={event.kind}>
        <td className={td}>{event.seq}</td>
        <td className={td}>{formatTime(event.atMs)}</td>
        <td className={`${td} dex-mono`}>{event.kind}</td>
        <td className={td}>{event.stepExecutionId}</td>
        <td className={`${td} dex-event-summary`}>
          {summary.length > summaryMax ? `${summary.slice(0, summaryMax)}…` : summary}
        </td>
        <td className={td}>
          <button
            type="button"
            className="dex-row-button mantine-focus-auto"
            aria-expanded={open}
            aria-controls={detailId}
            aria-label={`${open ? "Hide" : "Show"} the JSON of event ${event.seq}`}
            onClick={() => setOpen((o) => !o)}
          >
            {open ? "Hide JSON" : "JSON"}
          </button>
        </td>
      </Table.Tr>
      {open && (
        <Table.Tr id={detailId}>
          <td className={td} colSpan={6}>
            <JsonBlock value={event} label={`Event ${event.seq} as JSON`} />
          </td>
        </Table.Tr>
      )}
    </>
  );
});
