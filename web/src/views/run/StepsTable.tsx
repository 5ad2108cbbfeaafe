// Step executions (the active ones, or those that ended): phase, method, attempt, task state,
// Worker, what a waiting one waits for, and the last failure.
import { Table, Text } from "@mantine/core";
import type { StepExecutionView } from "../../api/types";
import { enumName, formatTime } from "../../format";
import { conditionText } from "./conditionText";

export function StepsTable({ steps, label, testId }: { steps: StepExecutionView[]; label: string; testId: string }) {
  if (steps.length === 0) return <Text size="sm" c="dimmed">None.</Text>;
  return (
    <Table.ScrollContainer minWidth={800}>
      <Table striped aria-label={label} data-testid={testId}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Execution</Table.Th>
            <Table.Th scope="col">Phase</Table.Th>
            <Table.Th scope="col">Method</Table.Th>
            <Table.Th scope="col">Attempt</Table.Th>
            <Table.Th scope="col">Task</Table.Th>
            <Table.Th scope="col">Conditions</Table.Th>
            <Table.Th scope="col">Last failure</Table.Th>
            <Table.Th scope="col">Created (UTC)</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {steps.map((s) => (
            <Table.Tr key={s.stepExecutionId} data-testid="step-row">
              <Table.Td>
                <Text size="sm" fw={500}>
                  {s.stepExecutionId}
                </Text>
                {s.scheduledBy && (
                  <Text size="xs" c="dimmed">
                    after {s.scheduledBy}
                  </Text>
                )}
              </Table.Td>
              <Table.Td>{enumName(s.phase, "PHASE_")}</Table.Td>
              <Table.Td>{enumName(s.method, "METHOD_")}</Table.Td>
              <Table.Td>{s.attempt || ""}</Table.Td>
              <Table.Td>
                {enumName(s.taskState, "TASK_")}
                {s.workerId && (
                  <Text size="xs" c="dimmed">
                    on {s.workerId}
                  </Text>
                )}
                {Number(s.retryUnixMs) > 0 && (
                  <Text size="xs" c="dimmed">
                    retry at {formatTime(s.retryUnixMs)}
                  </Text>
                )}
              </Table.Td>
              <Table.Td>
                {s.conditions.map((c, i) => (
                  <Text size="xs" key={i}>
                    {conditionText(c)}
                  </Text>
                ))}
              </Table.Td>
              <Table.Td>
                {s.lastFailure && (
                  <Text size="xs" c="red.9">
                    attempt {s.lastFailure.attempt}, {enumName(s.lastFailure.outcome, "ATTEMPT_")}: {s.lastFailure.error}
                  </Text>
                )}
              </Table.Td>
              <Table.Td>{formatTime(s.createdUnixMs)}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
