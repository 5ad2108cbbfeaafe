// Skip a Timer: a waiting Step execution's Timer condition (by execution ID and condition index)
// fires now, or the run's own Timer: its flow timeout (the timeout policy applies now) or its start
// delay (the start Step is created now).
import { useState } from "react";
import { Radio, Stack, Text } from "@mantine/core";
import { skipTimer } from "../../../api/calls";
import type { RunTimer } from "../../../api/types";
import { formatTime } from "../../../format";
import { ActionModal } from "./ActionModal";
import type { ActionProps } from "./actionProps";
import { InputError } from "./encode";
import { useAction } from "./useAction";

interface Choice {
  value: string;
  label: string;
  description: string;
  target: { stepExecutionId: string; conditionIndex: number } | { runTimer: RunTimer };
}

function choices(state: ActionProps["state"]): Choice[] {
  const out: Choice[] = [];
  for (const s of state?.active ?? [])
    s.conditions.forEach((c, i) => {
      if (!c.condition?.timer || c.fired || c.skipped) return;
      const id = c.condition.conditionId ? ` "${c.condition.conditionId}"` : "";
      out.push({
        value: `step:${s.stepExecutionId}:${i}`,
        label: `${s.stepExecutionId}, condition ${i}${id}: Timer at ${formatTime(c.timerUnixMs)} UTC`,
        description: "fires now; the execution goes on as if the Timer had fired",
        target: { stepExecutionId: s.stepExecutionId, conditionIndex: i },
      });
    });
  // Nothing created yet: the start Step waits for the start delay.
  const startPending = state !== undefined && state.active.length === 0 && Number(state.endedCount) === 0;
  if (startPending)
    out.push({
      value: "run:RUN_TIMER_START_DELAY",
      label: "The run's start delay",
      description: "the start Step is created now",
      target: { runTimer: "RUN_TIMER_START_DELAY" },
    });
  out.push({
    value: "run:RUN_TIMER_FLOW_TIMEOUT",
    label: "The run's flow timeout",
    description: "its timeout policy applies now (a run started without a timeout has none: the server says so)",
    target: { runTimer: "RUN_TIMER_FLOW_TIMEOUT" },
  });
  return out;
}

export function SkipTimerModal({ flow, state, opened, onClose, onDone }: ActionProps) {
  const options = choices(state);
  const [value, setValue] = useState(options[0]?.value ?? "");
  const action = useAction<object>();
  const chosen = options.find((o) => o.value === value);

  const submit = () => {
    void action.send((requestId) => {
      if (!chosen) throw new InputError("choose a Timer");
      return skipTimer({ flow: { flowId: flow.flowId, runId: flow.runId }, ...chosen.target, requestId });
    }, () => onDone(`Skipped: ${chosen?.label}.`));
  };

  return (
    <ActionModal
      opened={opened}
      onClose={onClose}
      title="Skip a Timer"
      action={action}
      submitLabel="Skip the Timer"
      onSubmit={submit}
      testId="skip-timer-modal"
    >
      <Radio.Group label="Timer" value={value} onChange={setValue} required>
        <Stack gap="xs" mt={4}>
          {options.map((o, i) => (
            <Radio key={o.value} value={o.value} label={o.label} description={o.description} data-autofocus={i === 0 || undefined} />
          ))}
        </Stack>
      </Radio.Group>
      {options.length === 1 && (
        <Text size="xs" c="dimmed">
          No active Step waits on a Timer now.
        </Text>
      )}
    </ActionModal>
  );
}
