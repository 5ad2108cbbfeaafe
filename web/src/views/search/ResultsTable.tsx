// The rows of one SearchFlows page: Flow ID, run ID, type, status, start, close, duration, and the
// index values the query named.
import { memo } from "react";
import { Anchor, Table, Text } from "@mantine/core";
import { Link } from "react-router";
import type { FlowSearchRow } from "../../api/types";
import { StatusBadge } from "../../components/StatusBadge";
import { formatTime, runDuration, runPath, searchFieldText } from "../../format";

const nowrap = { whiteSpace: "nowrap" } as const;

interface Props {
  rows: FlowSearchRow[];
  query?: string; // the query these rows answer (data-query: what a test waits for)
  pageToken?: string; // and the page token they answer ("" on the first page; data-page-token)
  loading: boolean;
}

// The rows are drawn again only when a new answer comes (not when a click starts loading the next
// page, or the query box changes): at 50-200 rows of Mantine cells that is most of a page change's
// time in the browser.
const Rows = memo(function Rows({ rows }: { rows: FlowSearchRow[] }) {
  // Keyed by position: the next page's rows take the cells of this page's, updated in place
  // (rows hold no state of their own), instead of 50 rows unmounted and 50 new ones mounted.
  return rows.map((r, i) => <Row key={i} row={r} />);
});

const Row = memo(function Row({ row: r }: { row: FlowSearchRow }) {
  return (
    <Table.Tr data-testid="result-row">
      <Table.Td>
        <Anchor component={Link} to={runPath(r.flowId, r.runId)}>
          {r.flowId}
        </Anchor>
      </Table.Td>
      <Table.Td>
        <Text size="xs" ff="monospace">
          {r.runId}
        </Text>
      </Table.Td>
      <Table.Td>{r.flowType}</Table.Td>
      <Table.Td style={nowrap}>
        <StatusBadge status={r.status} />
      </Table.Td>
      <Table.Td style={nowrap}>{formatTime(r.startUnixMs)}</Table.Td>
      <Table.Td style={nowrap}>{formatTime(r.closeUnixMs)}</Table.Td>
      <Table.Td style={nowrap}>{runDuration(r.startUnixMs, r.closeUnixMs)}</Table.Td>
      <Table.Td>
        <Text size="xs">{r.fields.map((f) => `${f.key}=${searchFieldText(f)}`).join("; ")}</Text>
      </Table.Td>
    </Table.Tr>
  );
});

export function ResultsTable({ rows, query, pageToken, loading }: Props) {
  return (
    <Table.ScrollContainer minWidth={900}>
      <Table
        striped
        highlightOnHover
        aria-busy={loading}
        data-testid="results"
        data-query={query}
        data-page-token={pageToken}
      >
        <Table.Caption>{loading ? "Searching..." : `${rows.length} run(s) on this page`}</Table.Caption>
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Flow ID</Table.Th>
            <Table.Th scope="col">Run ID</Table.Th>
            <Table.Th scope="col">Type</Table.Th>
            <Table.Th scope="col">Status</Table.Th>
            <Table.Th scope="col" style={nowrap}>Start (UTC)</Table.Th>
            <Table.Th scope="col" style={nowrap}>Close (UTC)</Table.Th>
            <Table.Th scope="col">Duration</Table.Th>
            <Table.Th scope="col">Fields</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          <Rows rows={rows} />
          {!loading && rows.length === 0 && (
            <Table.Tr>
              <Table.Td colSpan={8}>
                <Text c="dimmed">No run matches.</Text>
              </Table.Td>
            </Table.Tr>
          )}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
