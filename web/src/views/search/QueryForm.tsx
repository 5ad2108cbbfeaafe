// The query box: the SearchFlows query language (docs/search.md); Enter or the button searches.
import { useEffect, useState } from "react";
import { Button, Group, Text, TextInput } from "@mantine/core";

export function QueryForm({ query, onSearch }: { query: string; onSearch: (q: string) => void }) {
  const [draft, setDraft] = useState(query);
  useEffect(() => setDraft(query), [query]);
  return (
    <form
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        onSearch(draft.trim());
      }}
    >
      <Group align="flex-end" wrap="nowrap">
        <TextInput
          style={{ flex: 1 }}
          label="Query"
          name="q"
          placeholder="e.g. FlowType = 'OrderProcessing' AND Status = 'RUNNING'"
          description={
            <Text span size="xs">
              System fields (FlowId, RunId, FlowType, Status, StartTime, CloseTime, ExecutionDuration,
              ParentFlowId, ActiveStepTypes) and indexed Attributes; AND, OR, NOT, IN, BETWEEN,
              STARTS_WITH, IS NULL, ORDER BY. Empty: every run, newest first.
            </Text>
          }
          value={draft}
          onChange={(e) => setDraft(e.currentTarget.value)}
          spellCheck={false}
          autoComplete="off"
          ff="monospace"
        />
        <Button type="submit">Search</Button>
      </Group>
    </form>
  );
}
