// Paging through SearchFlows with its keyset tokens, kept in the URL so that a page can be shared
// and the browser's Back and Forward move between pages: `token` (the page token of the page
// shown; none on the first page), `page` (its number, for the reader) and `size` (rows per page;
// none for the default). A token is the last row's sort key, not an offset, so the page before
// cannot be derived from it: the tokens of the pages before this one travel in the history entry's
// state, and "Previous page" uses them. A shared link has no such state: "First page" (and, from
// page 2, "Previous page") still works.
import { Button, Group, NativeSelect, Text } from "@mantine/core";
import { useLocation, useSearchParams } from "react-router";
import { searchFlows } from "../../api/calls";
import type { SearchFlowsResponse } from "../../api/types";

export const pageSizes = [25, 50, 100, 200];
export const defaultPageSize = 50;
const maxTokens = 500; // the tokens a history entry keeps (about 150 bytes each)

interface SearchRequest {
  query: string;
  pageSize: number;
  pageToken: string;
}

// A page change sends its SearchFlows call at the click, not once the navigation has rendered the
// view and its effect asks (6-60 ms later on a busy machine): searchPage() takes that call's
// answer when its request is the one started, within a second, else calls. Taken once, never
// kept: a page change that asks nothing new (the same query searched again) leaves it unused.
let early: { key: string; at: number; answer: Promise<SearchFlowsResponse> } | undefined;
const keyOf = (r: SearchRequest) => JSON.stringify([r.query, r.pageSize, r.pageToken]);

function startEarly(req: SearchRequest) {
  const answer = searchFlows(req);
  answer.catch(() => undefined); // its error goes to searchPage's caller, if it is taken
  early = { key: keyOf(req), at: performance.now(), answer };
}

/** SearchFlows for the view: the call a page change started, or a new one. */
export function searchPage(req: SearchRequest, signal: AbortSignal): Promise<SearchFlowsResponse> {
  const e = early;
  early = undefined;
  const fresh = e !== undefined && e.key === keyOf(req) && performance.now() - e.at < 1000;
  return fresh ? e.answer : searchFlows(req, signal);
}

/** The history entry's state: the page tokens of the pages before the one shown. */
interface PagingState {
  searchTokens?: unknown;
}

export interface SearchPaging {
  pageSize: number;
  pageToken: string;
  page: number;
  /** Known when this page was reached by paging in this tab (or it is page 2). */
  previousToken: string | undefined;
  next: (nextPageToken: string) => void;
  previous: () => void;
  first: () => void;
  setPageSize: (size: number) => void;
  /** A new query: its first page, at the same page size. */
  search: (query: string) => void;
}

export function useSearchPaging(): SearchPaging {
  const [params, setParams] = useSearchParams();
  const location = useLocation();
  const size = Number(params.get("size"));
  const pageSize = pageSizes.includes(size) ? size : defaultPageSize;
  const pageToken = params.get("token") ?? "";
  const pageParam = Math.floor(Number(params.get("page")));
  const page = pageToken === "" ? 1 : Number.isFinite(pageParam) && pageParam >= 2 ? pageParam : 2;
  const state = location.state as PagingState | null;
  // The tokens of the pages just before this one, oldest first (all of them after paging from
  // the first page; fewer, or none, from a shared link).
  const before =
    Array.isArray(state?.searchTokens) &&
    state.searchTokens.length <= page - 1 &&
    state.searchTokens.every((t) => typeof t === "string")
      ? (state.searchTokens as string[])
      : [];
  const previousToken = before.length > 0 ? before[before.length - 1] : page === 2 ? "" : undefined;

  const go = (query: string | null, token: string, n: number, tokens: string[], sz = pageSize) => {
    const next = new URLSearchParams();
    if (query !== null && query !== "") next.set("q", query);
    if (sz !== defaultPageSize) next.set("size", String(sz));
    if (token !== "") {
      next.set("page", String(n));
      next.set("token", token);
    }
    startEarly({ query: query ?? "", pageSize: sz, pageToken: token });
    setParams(next, { state: { searchTokens: tokens } satisfies PagingState });
  };
  const query = params.get("q");
  return {
    pageSize,
    pageToken,
    page,
    previousToken,
    next: (nextPageToken) => go(query, nextPageToken, page + 1, [...before, pageToken].slice(-maxTokens)),
    previous: () => {
      if (previousToken !== undefined) go(query, previousToken, page - 1, before.slice(0, -1));
    },
    first: () => go(query, "", 1, []),
    setPageSize: (sz) => go(query, "", 1, [], sz),
    search: (q) => go(q, "", 1, []),
  };
}

interface Props {
  paging: SearchPaging;
  rows: number; // on the page shown
  hasNext: boolean;
  loading: boolean;
  onNext: () => void;
  appliedSlot?: string;
}

export function Pager({ paging, rows, hasNext, loading, onNext, appliedSlot }: Props) {
  const { page, pageSize, previousToken } = paging;
  const firstRow = (page - 1) * pageSize + 1;
  const where =
    rows === 0
      ? `Page ${page}`
      : `Page ${page}: runs ${firstRow.toLocaleString("en")}-${(firstRow + rows - 1).toLocaleString("en")}` +
        (hasNext ? ", more follow" : ", the last page");
  return (
    <Group justify="space-between">
      <Group gap="xs" role="navigation" aria-label="Result pages">
        <Button size="xs" variant="default" disabled={page <= 1 || loading} onClick={paging.first}>
          First page
        </Button>
        <Button
          size="xs"
          variant="default"
          disabled={page <= 1 || previousToken === undefined || loading}
          onClick={paging.previous}
        >
          Previous page
        </Button>
        <Text size="sm" aria-live="polite" data-testid="page-position">
          {where}
        </Text>
        <Button size="xs" variant="default" disabled={!hasNext || loading} onClick={onNext}>
          Next page
        </Button>
        <NativeSelect
          size="xs"
          label="Rows per page"
          styles={{ root: { display: "flex", alignItems: "center", gap: 6 }, label: { fontWeight: 400 } }}
          data={pageSizes.map(String)}
          value={String(pageSize)}
          onChange={(e) => paging.setPageSize(Number(e.currentTarget.value))}
        />
      </Group>
      {appliedSlot !== undefined && (
        <Text size="xs" c="dimmed">
          as of log slot {appliedSlot}
        </Text>
      )}
    </Group>
  );
}
