// A waiting execution's condition in words: "Timer at 10:00:00 (fired)", "Channel verify: 1 queued".
import type { ConditionView } from "../../api/types";
import { enumName, formatTime } from "../../format";

export function conditionText(c: ConditionView): string {
  const cond = c.condition;
  let what = "condition";
  if (cond?.timer) what = `Timer at ${formatTime(c.timerUnixMs)} UTC`;
  else if (cond?.channel) {
    const ch = cond.channel;
    const match = enumName(ch.match, "");
    what = `Channel ${ch.channel}${ch.instanceKey ? `[${ch.instanceKey}]` : ""} ${match}: ${c.queued} queued`;
  } else if (cond?.subFlow) what = `SubFlow ${cond.subFlow.flowType} ${c.childFlowId}`;
  if (cond?.conditionId) what = `${cond.conditionId}: ${what}`;
  const flags = [c.fired && "fired", c.skipped && "skipped"].filter(Boolean).join(", ");
  return flags ? `${what} (${flags})` : what;
}
