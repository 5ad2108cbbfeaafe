// Shown when the FlowService answers UNAVAILABLE: this process is not the active one (a standby, or
// starting, taking over, stepping down). It says so plainly, with what the process says about itself
// (GET /api/v1/process, which a standby answers too): its role and the active process and epoch it
// last saw.
import { Alert, Anchor, Code, Text } from "@mantine/core";
import { Link } from "react-router";
import type { ApiError } from "../api/client";
import { activeHolderText, getProcessStatus, roleLabel } from "../views/node/processCalls";
import { useApi } from "../useApi";

export function StandbyBanner({ error }: { error: ApiError }) {
  const proc = useApi((signal) => getProcessStatus(signal), []);
  const p = proc.data;
  const standby = p !== undefined && (p.role === "hot-standby" || p.role === "cold-standby");
  const title =
    p === undefined
      ? "This process is not serving (standby)"
      : p.serving
        ? "This process did not serve the call"
        : `This process is not serving (${roleLabel(p.role)})`;
  return (
    <Alert
      color="yellow"
      title={title}
      role="alert"
      data-testid="standby-banner"
      styles={{ title: { color: "var(--mantine-color-text)" } }}
    >
      <Text size="sm">
        The FlowService answered <Code>UNAVAILABLE</Code>: {error.message}
      </Text>
      {p !== undefined && (
        <Text size="sm" mt="xs" data-testid="standby-banner-process">
          This process ({p.processId}) is {standby ? "a " : ""}
          {roleLabel(p.role)} of node {p.nodeId}
          {p.standbyState !== null ? `, ${p.standbyState}` : ""}
          {p.lagSeconds !== null ? ` (lag ${p.lagSeconds.toFixed(1)} s)` : ""}. The active process:{" "}
          {activeHolderText(p)}.
        </Text>
      )}
      {proc.error !== undefined && (
        <Text size="sm" mt="xs">
          GET /api/v1/process: {proc.error instanceof Error ? proc.error.message : String(proc.error)}
        </Text>
      )}
      <Text size="sm" mt="xs">
        Use the active process's dex-web{standby ? ", or wait for this one to take over" : ""}. The{" "}
        <Anchor component={Link} to="/node" size="sm">
          Node view
        </Anchor>{" "}
        shows this process.
      </Text>
    </Alert>
  );
}
