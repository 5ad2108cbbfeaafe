// Node (`/node`): what this process is. AdminService.Describe (node ID, epoch, lease holder, the
// Attribute Stores' sync), whether the FlowService serves here (a standby answers UNAVAILABLE), and
// the web server's own facts (GET /api/v1/web).
import { Badge, Card, Group, SimpleGrid, Stack, Text, Title } from "@mantine/core";
import { adminDescribe, searchFlows } from "../../api/calls";
import { getWebInfo, isUnavailable } from "../../api/client";
import { useApi } from "../../useApi";
import { ErrorAlert } from "../../components/ErrorAlert";
import { Field } from "../../components/Field";
import { AttributeStoresTable } from "./AttributeStoresTable";

export function NodePage() {
  const describe = useApi((signal) => adminDescribe(signal), []);
  const web = useApi((signal) => getWebInfo(signal), []);
  // A one-row search says whether this process serves the FlowService (the active process) or not.
  const probe = useApi((signal) => searchFlows({ query: "", pageSize: 1 }, signal), []);
  const serving = probe.data !== undefined;
  const standby = isUnavailable(probe.error);

  return (
    <Stack gap="md">
      <Group gap="sm">
        <Title order={1} size="h2">
          Node
        </Title>
        {serving && (
          <Badge color="green" variant="dot" size="lg" data-testid="role-badge">
            active: serving
          </Badge>
        )}
        {standby && (
          <Badge color="yellow" variant="dot" size="lg" data-testid="role-badge">
            not serving (standby)
          </Badge>
        )}
      </Group>
      {probe.error !== undefined && <ErrorAlert error={probe.error} title="The FlowService did not answer" />}
      <Card withBorder component="section" aria-labelledby="describe-title" data-testid="node-describe">
        <Title order={2} size="h3" id="describe-title" mb="sm">
          AdminService.Describe
        </Title>
        {/* On a standby the banner above already says so: Describe's own answer is plain text here. */}
        {isUnavailable(describe.error) && (
          <Text size="sm" data-testid="describe-unavailable">
            UNAVAILABLE: {describe.error.message}
          </Text>
        )}
        {describe.error !== undefined && !isUnavailable(describe.error) && (
          <ErrorAlert error={describe.error} title="Describe failed" onRetry={describe.reload} />
        )}
        {describe.data && (
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
          The web server reaches the engine only through this process's public API, with your credential.
        </Text>
      </Card>
    </Stack>
  );
}
