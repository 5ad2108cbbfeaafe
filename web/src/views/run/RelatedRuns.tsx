// Links from a run to the runs around it: its Flow retry's previous and next run, the run it
// continues and the one it continued as, the runs time travel made from or to it, its SubFlow
// parents, and its SubFlow children (the runs its SubFlow conditions started, from its history's
// SUB_FLOW_STARTED events and its state's waiting conditions, each with how it closed when its
// SUB_FLOW_CLOSED event says).
import { useState } from "react";
import { Anchor, Button, Group, Stack, Text } from "@mantine/core";
import { Link } from "react-router";
import type { FlowDescription, GetFlowStateResponse, HistoryEvent } from "../../api/types";
import { runPath, statusName } from "../../format";

export interface ChildRun {
  flowId: string;
  runId: string;
  /** The execution whose SubFlow condition started it, and the condition's index. */
  stepExecutionId: string;
  conditionIndex: number;
  /** How it closed ("" while it runs, or when the history read does not say). */
  status: string;
}

/** The SubFlow children a run started: its history's SUB_FLOW_* events, then its state's waiting conditions. */
export function childRuns(events: HistoryEvent[], state: GetFlowStateResponse | undefined): ChildRun[] {
  const byKey = new Map<string, ChildRun>();
  const key = (flowId: string, runId: string) => `${flowId}\u0000${runId}`;
  for (const e of events) {
    if (e.kind !== "SUB_FLOW_STARTED" && e.kind !== "SUB_FLOW_CLOSED") continue;
    const flowId = String(e.childFlowId ?? "");
    const runId = String(e.childRunId ?? "");
    if (!flowId) continue;
    const k = key(flowId, runId);
    let c = byKey.get(k);
    if (!c) {
      c = { flowId, runId, stepExecutionId: e.stepExecutionId, conditionIndex: Number(e.conditionIndex ?? 0), status: "" };
      byKey.set(k, c);
    }
    if (e.kind === "SUB_FLOW_CLOSED") c.status = statusName(e.status);
  }
  const active = state ? [...state.active, ...(state.timeoutHandler ? [state.timeoutHandler] : [])] : [];
  for (const x of active)
    x.conditions.forEach((c, i) => {
      if (!c.condition?.subFlow || !c.childFlowId) return;
      const k = key(c.childFlowId, c.childRunId);
      if (!byKey.has(k))
        byKey.set(k, { flowId: c.childFlowId, runId: c.childRunId, stepExecutionId: x.stepExecutionId, conditionIndex: i, status: "" });
    });
  return byKey.size ? [...byKey.values()] : noChildren;
}

const noChildren: ChildRun[] = [];

const childrenShown = 10;

function Children({ children }: { children: ChildRun[] }) {
  const [all, setAll] = useState(false);
  if (children.length === 0) return null;
  const shown = all ? children : children.slice(0, childrenShown);
  return (
    <div>
      <Text size="sm" c="dimmed" id="children-title">
        SubFlow children ({children.length}):
      </Text>
      <Group gap="md" component="ul" style={{ listStyle: "none", padding: 0, margin: 0 }} aria-labelledby="children-title" data-testid="child-runs">
        {shown.map((c) => (
          <li key={`${c.flowId}:${c.runId}`} data-testid="child-run" data-flow-id={c.flowId} data-status={c.status || "RUNNING"}>
            <Anchor component={Link} to={runPath(c.flowId, c.runId)} size="sm">
              {c.flowId}
            </Anchor>{" "}
            <Text size="xs" span c="dimmed">
              ({c.stepExecutionId}, condition {c.conditionIndex}
              {c.status ? `, ${c.status}` : ""})
            </Text>
          </li>
        ))}
      </Group>
      {children.length > childrenShown && (
        <Button size="compact-xs" variant="subtle" mt={4} onClick={() => setAll((a) => !a)} aria-expanded={all}>
          {all ? "Show fewer children" : `Show all ${children.length} children`}
        </Button>
      )}
    </div>
  );
}

export function RelatedRuns({ flow, children = [] }: { flow: FlowDescription; children?: ChildRun[] }) {
  const links: { label: string; flowId: string; runId: string; testId: string }[] = [];
  const same = (label: string, runId: string, testId: string) => {
    if (runId) links.push({ label, flowId: flow.flowId, runId, testId });
  };
  const continued = flow.status === "FLOW_CONTINUED_AS_NEW";
  same("previous run (retry)", flow.previousRunId, "previous-run");
  same(continued ? "continued as" : "next run (retry)", flow.nextRunId, continued ? "continued-as" : "next-run");
  same("continued from", flow.continuedFromRunId, "continued-from");
  same("traveled from", flow.traveledFromRunId, "traveled-from");
  same("traveled to", flow.traveledToRunId, "traveled-to");
  for (const p of flow.parents)
    links.push({ label: `SubFlow parent (${p.stepExecutionId})`, flowId: p.flowId, runId: p.runId, testId: "parent-run" });
  if (links.length === 0 && children.length === 0)
    return (
      <Text size="sm" c="dimmed" data-testid="related-runs">
        No related runs.
      </Text>
    );
  return (
    <Stack gap={6} data-testid="related-runs">
      {links.length > 0 && (
        <Group gap="md" component="ul" style={{ listStyle: "none", padding: 0, margin: 0 }} aria-label="Related runs">
          {links.map((l) => (
            <li key={`${l.label}:${l.flowId}:${l.runId}`} data-testid={l.testId}>
              <Text size="sm" span c="dimmed">
                {l.label}:{" "}
              </Text>
              <Anchor component={Link} to={runPath(l.flowId, l.runId)} size="sm">
                {l.flowId === flow.flowId ? l.runId : `${l.flowId} / ${l.runId}`}
              </Anchor>
            </li>
          ))}
        </Group>
      )}
      <Children children={children} />
    </Stack>
  );
}
