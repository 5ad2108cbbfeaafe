// Step executions (the active ones, or those that ended): phase, method, attempt, task state,
// Worker, what a waiting one waits for (a SubFlow condition links its child run), and the last
// failure: a retrying attempt's (while it waits for its retry, or runs again) with when it ended
// and its whole error text, line breaks kept (a long one truncated, with "Show all"). Plain cells
// with Mantine's table classes: a hundred ended executions draw fast.
import { Table, Text } from "@mantine/core";
import { Link } from "react-router";
import type { ConditionView, StepExecutionView } from "../../api/types";
import { LongText } from "../../components/JsonBlock";
import { enumName, formatTime, runPath } from "../../format";
import { conditionText } from "./conditionText";
import "./run.css";

const td = Table.classes.td;

function ConditionLine({ c }: { c: ConditionView }) {
  const text = conditionText(c);
  if (c.condition?.subFlow && c.childFlowId)
    return (
      <span className="dex-line" data-testid="subflow-condition">
        {text}
        {c.childRunId && (
          <>
            {" "}
            (<Link to={runPath(c.childFlowId, c.childRunId)}>child run {c.childRunId}</Link>)
          </>
        )}
      </span>
    );
  return <span className="dex-line">{text}</span>;
}

function Failure({ s }: { s: StepExecutionView }) {
  const f = s.lastFailure;
  if (!f) return null;
  return (
    <div data-testid="last-failure">
      <span className="dex-failure">
        attempt {f.attempt}, {enumName(f.outcome, "ATTEMPT_")}
        {Number(f.atMs) > 0 && ` at ${formatTime(f.atMs)} UTC`}
        :
      </span>
      <div className="dex-failure">
        <LongText text={f.error || "(no error text)"} size="xs" label={`the last failure of ${s.stepExecutionId}`} />
      </div>
    </div>
  );
}

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
            <Table.Tr key={s.stepExecutionId} data-testid="step-row" data-id={s.stepExecutionId}>
              <td className={td}>
                <span className="dex-strong">{s.stepExecutionId}</span>
                {s.scheduledBy && <span className="dex-sub">after {s.scheduledBy}</span>}
              </td>
              <td className={td}>{enumName(s.phase, "PHASE_")}</td>
              <td className={td}>{enumName(s.method, "METHOD_")}</td>
              <td className={td}>{s.attempt || ""}</td>
              <td className={td}>
                {enumName(s.taskState, "TASK_")}
                {s.workerId && <span className="dex-sub">on {s.workerId}</span>}
                {Number(s.retryUnixMs) > 0 && <span className="dex-sub">retry at {formatTime(s.retryUnixMs)}</span>}
              </td>
              <td className={td}>
                {s.conditions.map((c, i) => (
                  <ConditionLine c={c} key={i} />
                ))}
              </td>
              <td className={td} style={{ maxWidth: 420 }}>
                <Failure s={s} />
              </td>
              <td className={td}>{formatTime(s.createdUnixMs)}</td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
