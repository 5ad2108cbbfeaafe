// Search (`/` and `/search?q=...`): a SearchFlows query (docs/search.md), quick filters, the
// results a page at a time. The URL holds the query, so a search can be shared.
import { useEffect, useState } from "react";
import { useSearchParams } from "react-router";
import { Stack, Title } from "@mantine/core";
import { searchFlows } from "../../api/calls";
import { useApi } from "../../useApi";
import { ErrorAlert } from "../../components/ErrorAlert";
import { QueryForm } from "./QueryForm";
import { QuickFilters } from "./QuickFilters";
import { ResultsTable } from "./ResultsTable";
import { Pager } from "./Pager";

const pageSize = 50;

export function SearchPage() {
  const [params, setParams] = useSearchParams();
  const query = params.get("q") ?? "";
  // The page tokens of the pages before this one: [""] is the first page.
  const [tokens, setTokens] = useState<string[]>([""]);
  useEffect(() => setTokens([""]), [query]);
  const pageToken = tokens[tokens.length - 1];

  const result = useApi(
    (signal) => searchFlows({ query, pageSize, pageToken }, signal).then((r) => ({ ...r, query })),
    [query, pageToken],
  );
  const runSearch = (q: string) => setParams(q === "" ? {} : { q });

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
          <ResultsTable rows={result.data?.rows ?? []} query={result.data?.query} loading={result.loading} />
          <Pager
            page={tokens.length}
            hasNext={(result.data?.nextPageToken ?? "") !== ""}
            loading={result.loading}
            onPrevious={() => setTokens((t) => (t.length > 1 ? t.slice(0, -1) : t))}
            onNext={() => {
              const next = result.data?.nextPageToken;
              if (next) setTokens((t) => [...t, next]);
            }}
            appliedSlot={result.data?.appliedSlot}
          />
        </>
      )}
    </Stack>
  );
}
