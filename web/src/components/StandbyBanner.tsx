// Shown when the FlowService answers UNAVAILABLE: this process is not the active one (a standby, or
// starting, or stepping down). It says so plainly, with what AdminService.Describe answers.
import { Alert, Code, Text } from "@mantine/core";
import type { ApiError } from "../api/client";
import { adminDescribe } from "../api/calls";
import { useApi } from "../useApi";

export function StandbyBanner({ error }: { error: ApiError }) {
  const describe = useApi((signal) => adminDescribe(signal), []);
  return (
    <Alert
      color="yellow"
      title="This process is not serving (standby)"
      role="alert"
      data-testid="standby-banner"
      styles={{ title: { color: "var(--mantine-color-text)" } }}
    >
      <Text size="sm">
        The FlowService answered <Code>UNAVAILABLE</Code>: {error.message}
      </Text>
      <Text size="sm" mt="xs">
        This process is not the node's active process (a standby, or starting, or stepping down). Use the
        active process's dex-web, or wait for this one to take over.
      </Text>
      <Text size="sm" mt="xs">
        {describe.loading && "Asking AdminService.Describe..."}
        {describe.data &&
          `AdminService.Describe: node ${describe.data.nodeId}, epoch ${describe.data.nodeEpoch}, holder ${describe.data.holderProcessId || "(none)"}.`}
        {describe.error !== undefined &&
          `AdminService.Describe: ${describe.error instanceof Error ? describe.error.message : String(describe.error)}`}
      </Text>
    </Alert>
  );
}
