// Node (`/node`): what this process is. GET /api/v1/process (its role, standby state and lag, the
// node epoch and lease holder it knows, its log position) answers on any process; on the active one
// AdminService.Describe adds the node's own account (node ID, epoch, holder, the Attribute Stores'
// sync). A standby gets a plain "not serving" page naming the active process when it is known. Last,
// the web server's own facts (GET /api/v1/web).
import { useEffect, useRef } from "react";
import { Alert, Badge, Card, Group, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import { adminDescribe, searchFlows } from "../../api/calls";
import { getWebInfo, isUnavailable } from "../../api/client";
import { useApi } from "../../useApi";
import { ErrorAlert } from "../../components/ErrorAlert";
import { Field } from "../../components/Field";
import { AttributeStoresTable } from "./AttributeStoresTable";
import { activeHolderText, roleLabel, useProcessStatus, type ProcessStatus } from "./processCalls";

export function NodePage() {
  const proc = useProcessStatus();
  const describe = useApi((signal) => adminDescribe(signal), []);
  const web = useApi((signal) => getWebInfo(signal), []);
  // A one-row search: whether the FlowService answers here (it does on the active process only).
  const probe = useApi((signal) => searchFlows({ query: "", pageSize: 1 }, signal), []);
  const p = proc.data;
  const serving = p?.serving;

  // A takeover (or a step down) while the page is open: ask the API again.
  const { reload: reloadDescribe } = describe;
  const { reload: reloadProbe } = probe;
  const servingBefore = useRef(serving);
  useEffect(() => {
    const before = servingBefore.current;
    servingBefore.current = serving;
    if (before === undefined || serving === undefined || before === serving) return;
    reloadDescribe();
    reloadProbe();
  }, [serving, reloadDescribe, reloadProbe]);

  return (
    <Stack gap="md">
      <Group gap="sm">
        <Title order={1} size="h2">
          Node
        </Title>
        {p && p.serving && (
          <Badge color="green" variant="dot" size="lg" data-testid="role-badge">
            active: serving
          </Badge>
        )}
        {p && !p.serving && (
          <Badge color="yellow" variant="dot" size="lg" data-testid="role-badge">
            {roleLabel(p.role)}: not serving
          </Badge>
        )}
      </Group>
      {proc.error !== undefined && p === undefined && (
        <ErrorAlert error={proc.error} title="GET /api/v1/process failed" onRetry={proc.reload} />
      )}
      {p && !p.serving && <NotServing p={p} />}
      {p && <ThisProcess p={p} />}
      <Card withBorder component="section" aria-labelledby="describe-title" data-testid="node-describe">
        <Title order={2} size="h3" id="describe-title" mb="sm">
          AdminService.Describe
        </Title>
        {isUnavailable(describe.error) && (
          <Text size="sm" data-testid="describe-unavailable">
            Answered on the active process only. Here: UNAVAILABLE: {describe.error.message}
          </Text>
        )}
        {describe.error !== undefined && !isUnavailable(describe.error) && (
          <ErrorAlert error={describe.error} title="Describe failed" onRetry={describe.reload} />
        )}
        {describe.data && describe.error === undefined && (
          <Stack gap="sm">
            <SimpleGrid cols={{ base: 1, sm: 3 }} component="dl" m={0}>
              <Field label="Node ID" testId="node-id">{describe.data.nodeId}</Field>
              <Field label="Node epoch" testId="node-epoch">{describe.data.nodeEpoch}</Field>
              <Field label="Lease holder (process ID)">{describe.data.holderProcessId}</Field>
            </SimpleGrid>
            <Title order={3} size="h5">
              Attribute Stores
            </Title>
            <AttributeStoresTable stores={describe.data.attributeStores} />
          </Stack>
        )}
        {probe.error !== undefined && !isUnavailable(probe.error) && (
          <ErrorAlert error={probe.error} title="The FlowService did not answer" onRetry={probe.reload} />
        )}
      </Card>
      <Card withBorder component="section" aria-labelledby="web-title">
        <Title order={2} size="h3" id="web-title" mb="sm">
          This web server
        </Title>
        {web.error !== undefined && <ErrorAlert error={web.error} title="GET /api/v1/web failed" />}
        {web.data && (
          <SimpleGrid cols={{ base: 1, sm: 3 }} component="dl" m={0}>
            <Field label="Version">{web.data.version}</Field>
            <Field label="API address">{web.data.apiAddress}</Field>
            <Field label="Admin calls need a credential">{web.data.adminAuth ? "yes" : "no"}</Field>
          </SimpleGrid>
        )}
        <Text size="xs" c="dimmed" mt="sm">
          The web server reaches the engine only through this process's public API, with your credential. The
          process status above is read from the process itself, so a standby answers it too.
        </Text>
      </Card>
    </Stack>
  );
}

/** A standby (or a process starting, taking over, stepping down, stopping): it does not serve. */
function NotServing({ p }: { p: ProcessStatus }) {
  const standby = p.role === "hot-standby" || p.role === "cold-standby";
  return (
    <Alert
      color="yellow"
      title={`This process is not serving: it is ${standby ? "a " : ""}${roleLabel(p.role)}`}
      role="status"
      data-testid="not-serving"
      styles={{ title: { color: "var(--mantine-color-text)" } }}
    >
      <Text size="sm">
        The active process of node <strong>{p.nodeId}</strong>:{" "}
        <strong data-testid="not-serving-holder">{activeHolderText(p)}</strong>.
      </Text>
      <Text size="sm" mt="xs">
        Its FlowService and AdminService.Describe answer <code>UNAVAILABLE</code> here; use the active process's
        dex-web{standby ? ", or wait for this one to take over" : ""}.
      </Text>
      {p.notServingReason && (
        <Text size="sm" mt="xs" data-testid="not-serving-reason">
          Why: {p.notServingReason}
        </Text>
      )}
    </Alert>
  );
}

function standbyText(p: ProcessStatus): string {
  if (p.standbyState !== null) return p.standbyState === "following" ? "following (hot)" : `${p.standbyState} (not hot)`;
  return p.serving ? "" : p.standbyMode === "cold" ? "cold: waits idle" : "not following";
}

/** GET /api/v1/process as a summary. */
function ThisProcess({ p }: { p: ProcessStatus }) {
  const holder =
    p.holderProcessId === null ? "" : p.holderIsThisProcess ? `${p.holderProcessId} (this process)` : p.holderProcessId;
  return (
    <Card withBorder component="section" aria-labelledby="process-title" data-testid="process">
      <Title order={2} size="h3" id="process-title" mb="sm">
        This process
      </Title>
      <SimpleGrid cols={{ base: 1, sm: 3 }} component="dl" m={0}>
        <Field label="Role" testId="process-role">
          {roleLabel(p.role)}
        </Field>
        <Field label="Phase" testId="process-phase">
          {p.phase}
        </Field>
        <Field label="Process ID" testId="process-id">
          {p.processId}
        </Field>
        <Field label="Node ID">{p.nodeId}</Field>
        <Field label={p.serving ? "Node epoch (held)" : "Node epoch (last seen)"} testId="process-epoch">
          {p.epoch ?? ""}
        </Field>
        <Field label="Lease holder" testId="process-holder">
          {p.leaseReleased ? `${holder} (released)` : holder}
        </Field>
        <Field label="Standby mode">{p.standbyMode}</Field>
        {/* The follower's state and lag mean something only on a standby. */}
        {!(p.serving && p.standbyState === null) && (
          <>
            <Field label="Standby state" testId="process-standby-state">
              {standbyText(p)}
            </Field>
            <Field label="Standby lag" testId="process-lag">
              {p.lagSeconds === null ? "" : `${p.lagSeconds.toFixed(2)} s`}
            </Field>
          </>
        )}
        {p.logHead !== null && (
          <Field label="Log head (last durable slot)" testId="process-log-head">
            {p.logHead}
          </Field>
        )}
        {p.appliedSlot !== null && (
          <Field label="Applied slot (local store)" testId="process-applied-slot">
            {p.appliedSlot}
          </Field>
        )}
        {p.logHead === null && p.appliedSlot === null && <Field label="Log position">{""}</Field>}
      </SimpleGrid>
    </Card>
  );
}
