// Search (`/` and `/search?q=...`): a SearchFlows query (docs/search.md), quick filters, the
// results a page at a time. The URL holds the query and the page (Pager.tsx), so a search can be
// shared.
import { useSearchParams } from "react-router";
import { Stack, Title } from "@mantine/core";
import { useApi } from "../../useApi";
import { ErrorAlert } from "../../components/ErrorAlert";
import { QueryForm } from "./QueryForm";
import { QuickFilters } from "./QuickFilters";
import { ResultsTable } from "./ResultsTable";
import { Pager, searchPage, useSearchPaging } from "./Pager";

export function SearchPage() {
  const [params] = useSearchParams();
  const query = params.get("q") ?? "";
  const paging = useSearchPaging(); // the page token and size, in the URL (Pager.tsx)
  const { pageSize, pageToken } = paging;

  const result = useApi(
    (signal) =>
      searchPage({ query, pageSize, pageToken }, signal).then((r) => ({ ...r, query, pageToken })),
    [query, pageSize, pageToken],
  );
  const runSearch = paging.search;

  return (
    <Stack gap="md">
      <Title order={1} size="h2">
        Search Flows
      </Title>
      <QueryForm query={query} onSearch={runSearch} />
      <QuickFilters onSearch={runSearch} />
      {result.error !== undefined && <ErrorAlert error={result.error} title="The search failed" />}
      {result.error === undefined && (
        <>
          <ResultsTable
            rows={result.data?.rows ?? []}
            query={result.data?.query}
            pageToken={result.data?.pageToken}
            loading={result.loading}
          />
          <Pager
            paging={paging}
            rows={result.data?.rows.length ?? 0}
            hasNext={(result.data?.nextPageToken ?? "") !== ""}
            loading={result.loading}
            onNext={() => {
              const next = result.data?.nextPageToken;
              if (next) paging.next(next);
            }}
            appliedSlot={result.data?.appliedSlot}
          />
        </>
      )}
    </Stack>
  );
}
