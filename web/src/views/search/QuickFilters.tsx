// Quick filters: queries one click away (running runs, failures of the last hour, one Flow type).
import { useState } from "react";
import { Button, Group, TextInput } from "@mantine/core";

/** A string literal of the query language: single quotes, with \ and ' escaped. */
export function quote(s: string): string {
  return `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
}

export function QuickFilters({ onSearch }: { onSearch: (q: string) => void }) {
  const [flowType, setFlowType] = useState("");
  const failedLastHour = () => {
    const since = new Date(Date.now() - 3600_000).toISOString();
    onSearch(`Status = 'FAILED' AND CloseTime >= ${quote(since)}`);
  };
  return (
    <Group gap="xs" align="flex-end" role="group" aria-label="Quick filters">
      <Button variant="light" size="xs" onClick={() => onSearch("Status = 'RUNNING'")}>
        Running
      </Button>
      <Button variant="light" size="xs" color="red" onClick={failedLastHour}>
        Failed in the last hour
      </Button>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (flowType.trim() !== "") onSearch(`FlowType = ${quote(flowType.trim())}`);
        }}
      >
        <Group gap={4} align="flex-end">
          <TextInput
            size="xs"
            label="Flow type"
            placeholder="OrderProcessing"
            value={flowType}
            onChange={(e) => setFlowType(e.currentTarget.value)}
          />
          <Button size="xs" variant="light" type="submit" disabled={flowType.trim() === ""}>
            By type
          </Button>
        </Group>
      </form>
      <Button variant="subtle" size="xs" onClick={() => onSearch("")}>
        All runs
      </Button>
    </Group>
  );
}
