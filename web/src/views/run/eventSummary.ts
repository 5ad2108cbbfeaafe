// One line that says what a history event is about, beside its kind; the whole event is its JSON.
import type { HistoryEvent } from "../../api/types";
import { statusName } from "../../format";

function decisionText(d: Record<string, unknown> | undefined): string {
  if (!d) return "";
  if (d.goTo) {
    const moves = ((d.goTo as { movements?: { stepType: string }[] }).movements ?? []).map((m) => m.stepType);
    return `go to ${moves.join(", ")}`;
  }
  if (d.gracefulComplete !== undefined) return "graceful complete";
  if (d.forceComplete !== undefined) return "force complete";
  if (d.forceFail !== undefined) return `force fail: ${String(d.forceFail)}`;
  if (d.deadEnd !== undefined) return "dead end";
  if (d.forceCompleteIfChannelsEmpty !== undefined) return "complete if channels empty";
  return "";
}

export function eventSummary(e: HistoryEvent): string {
  const parts: string[] = [];
  if (e.kind === "FLOW_CLOSED") parts.push(statusName(e.status));
  if (e.publish) parts.push(`channel ${e.publish.channel}${e.publish.instanceKey ? `[${e.publish.instanceKey}]` : ""}: ${e.publish.messages.length} message(s)`);
  const decision = decisionText(e.decision as Record<string, unknown> | undefined);
  if (decision) parts.push(decision);
  if (e.rpcName) parts.push(`RPC ${e.rpcName}`);
  if (e.attempt > 1) parts.push(`attempt ${e.attempt}`);
  if (e.error) parts.push(e.error);
  if (e.reason) parts.push(e.reason);
  const writes = (e.attributeWrites as unknown[] | undefined)?.length ?? 0;
  if (writes) parts.push(`${writes} Attribute write(s)`);
  return parts.join(" · ");
}
