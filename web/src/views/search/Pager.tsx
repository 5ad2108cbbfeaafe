// Paging through SearchFlows with its keyset tokens: next follows next_page_token, previous goes
// back to the token before.
import { Button, Group, Text } from "@mantine/core";

interface Props {
  page: number;
  hasNext: boolean;
  loading: boolean;
  onPrevious: () => void;
  onNext: () => void;
  appliedSlot?: string;
}

export function Pager({ page, hasNext, loading, onPrevious, onNext, appliedSlot }: Props) {
  return (
    <Group justify="space-between">
      <Group gap="xs" role="navigation" aria-label="Result pages">
        <Button size="xs" variant="default" disabled={page <= 1 || loading} onClick={onPrevious}>
          Previous page
        </Button>
        <Text size="sm" aria-live="polite">
          Page {page}
        </Text>
        <Button size="xs" variant="default" disabled={!hasNext || loading} onClick={onNext}>
          Next page
        </Button>
      </Group>
      {appliedSlot !== undefined && (
        <Text size="xs" c="dimmed">
          as of log slot {appliedSlot}
        </Text>
      )}
    </Group>
  );
}
