// A failed call, in the server's own words: its gRPC code and message (the gateway's error body).
// UNAVAILABLE means this process is not serving: the standby banner says so with what Describe says.
import { Alert, Button, Code, Group, Text } from "@mantine/core";
import { ApiError, isUnavailable } from "../api/client";
import { StandbyBanner } from "./StandbyBanner";

export function ErrorAlert({ error, title, onRetry }: { error: unknown; title?: string; onRetry?: () => void }) {
  if (isUnavailable(error)) return <StandbyBanner error={error} />;
  const code = error instanceof ApiError ? error.code : "ERROR";
  const message = error instanceof Error ? error.message : String(error);
  return (
    <Alert color="red" title={title ?? "The call failed"} role="alert" data-testid="error-alert">
      <Group gap="xs" align="flex-start" wrap="nowrap">
        <Code style={{ flexShrink: 0 }}>{code}</Code>
        <Text size="sm" style={{ whiteSpace: "pre-wrap" }} data-testid="error-message">
          {message}
        </Text>
      </Group>
      {onRetry && (
        <Button mt="sm" size="xs" variant="default" onClick={onRetry}>
          Try again
        </Button>
      )}
    </Alert>
  );
}
