// The selected execution: its type, phase, what started it and what it started, each method's
// attempts (outcome, error, the last failure), its input and its decision (the output) as JSON.
// A selected group lists its executions, each one click (or Enter) away.
import { Badge, Button, Card, Group, Stack, Table, Text, Title } from "@mantine/core";
import type { MethodRun, RunModel } from "./runModel";
import { sourceLabel } from "./graphView";
import { outcomeName, phaseFill, phaseStroke } from "./phaseColors";
import { JsonBlock } from "../../../components/JsonBlock";
import { formatDuration, formatTime, payloadText } from "../../../format";

function methodRow(name: string, m: MethodRun | undefined) {
  if (!m) return null;
  return (
    <Table.Tr>
      <Table.Td>{name}</Table.Td>
      <Table.Td>{m.attempts}</Table.Td>
      <Table.Td>{outcomeName[m.outcome]}</Table.Td>
      <Table.Td>{formatTime(m.start)}</Table.Td>
      <Table.Td>{m.end !== undefined ? formatDuration(m.end - m.start) : "under way"}</Table.Td>
      <Table.Td>
        {m.error && <Text size="xs" c="red.9">{m.error}</Text>}
        {m.lastFailure && (
          <Text size="xs" c="red.9">
            last failed attempt {m.lastFailure.attempt} ({outcomeName[m.lastFailure.outcome]}, {formatTime(m.lastFailure.atMs)}): {m.lastFailure.error}
          </Text>
        )}
      </Table.Td>
    </Table.Tr>
  );
}

export function ExecutionDetails({
  model,
  id,
  group,
  onSelect,
}: {
  model: RunModel;
  id: string;
  group?: string[];
  onSelect: (id: string, group?: string[]) => void;
}) {
  const x = model.byId.get(id);
  if (!x) return null;
  const started = model.children.get(x.id) ?? [];
  const link = (to: string) =>
    model.byId.has(to) ? (
      <Button key={to} size="compact-xs" variant="subtle" onClick={() => onSelect(to, group)}>
        {to}
      </Button>
    ) : (
      <Text key={to} span size="sm">
        {to === "" ? "the run's start" : sourceLabel(to)}
      </Text>
    );
  return (
    <Card withBorder data-testid="execution-details" data-id={x.id} aria-labelledby="execution-details-title">
      <Stack gap="xs">
        {group && group.length > 1 && (
          <div>
            <Text size="sm" fw={600}>
              {group.length} executions in this node:
            </Text>
            <Group gap={2} style={{ maxHeight: 96, overflowY: "auto" }} data-testid="group-members">
              {group.map((m) => (
                <Button key={m} size="compact-xs" variant={m === id ? "filled" : "subtle"} onClick={() => onSelect(m, group)} aria-pressed={m === id}>
                  {m}
                </Button>
              ))}
            </Group>
          </div>
        )}
        <Group gap="sm">
          <Title order={3} size="h4" id="execution-details-title">
            {x.id}
          </Title>
          <Badge
            variant="outline"
            style={{ background: phaseFill[x.phase], color: "#212529", borderColor: phaseStroke[x.phase] }}
            data-testid="execution-phase"
          >
            {x.phase}
          </Badge>
        </Group>
        <Text size="sm">
          Step type <b>{x.type}</b>, created {formatTime(x.created)} UTC
          {x.ended !== undefined && `, ended ${formatTime(x.ended)} UTC (${formatDuration(x.ended - x.created)})`}
        </Text>
        <Group gap={4}>
          <Text size="sm">Started by</Text>
          {link(x.parent)}
          {started.length > 0 && <Text size="sm">· started</Text>}
          {started.slice(0, 20).map(link)}
          {started.length > 20 && <Text size="sm">and {started.length - 20} more</Text>}
        </Group>
        {(x.waitFor || x.execute) && (
          <Table aria-label={`The attempts of ${x.id}`} data-testid="execution-attempts">
            <Table.Thead>
              <Table.Tr>
                <Table.Th scope="col">Method</Table.Th>
                <Table.Th scope="col">Attempts</Table.Th>
                <Table.Th scope="col">Outcome</Table.Th>
                <Table.Th scope="col">Start (UTC)</Table.Th>
                <Table.Th scope="col">Duration</Table.Th>
                <Table.Th scope="col">Error</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {methodRow("WaitFor", x.waitFor)}
              {methodRow("Execute", x.execute)}
            </Table.Tbody>
          </Table>
        )}
        {x.wait && (
          <Text size="sm">
            Waited {x.wait.end !== undefined ? formatDuration(x.wait.end - x.wait.start) : "since " + formatTime(x.wait.start)}: {x.wait.label}
            {x.wait.timer ? " (the wait has a Timer)" : ""}
          </Text>
        )}
        <Group grow align="flex-start">
          <div>
            <Text size="sm" fw={600}>
              Input
            </Text>
            <JsonBlock value={x.input ? payloadText(x.input) : x.parent === "" ? "(the run's input)" : "(not in the history read)"} label={`The input of ${x.id}`} />
          </div>
          <div>
            <Text size="sm" fw={600}>
              Decision (output)
            </Text>
            <JsonBlock value={x.decision !== undefined ? decisionWithPayloads(x.decision) : "(none yet)"} label={`The decision of ${x.id}`} />
          </div>
        </Group>
      </Stack>
    </Card>
  );
}

/** A decision's JSON with each Payload's bytes shown as the JSON they hold. */
function decisionWithPayloads(d: unknown): unknown {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === "object") {
      const o = v as Record<string, unknown>;
      if (typeof o.data === "string" && Object.keys(o).length === 1) {
        const t = payloadText({ data: o.data });
        try {
          return JSON.parse(t);
        } catch {
          return t;
        }
      }
      return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, walk(x)]));
    }
    return v;
  };
  return walk(d);
}
