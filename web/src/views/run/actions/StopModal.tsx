// Stop the run: cancel, terminate or fail it, with a reason. The request names the run shown,
// exactly (never "the latest run"), so a newer run of the Flow ID is never stopped by mistake.
import { useState } from "react";
import { Code, Radio, Stack, Text, Textarea } from "@mantine/core";
import { stopFlow } from "../../../api/calls";
import type { StopMode } from "../../../api/types";
import { ActionModal } from "./ActionModal";
import type { ActionProps } from "./actionProps";
import { useAction } from "./useAction";

const modes: { value: StopMode; label: string; description: string }[] = [
  { value: "STOP_CANCEL", label: "Cancel", description: "ends CANCELED; the Workers of running attempts are told" },
  { value: "STOP_TERMINATE", label: "Terminate", description: "ends TERMINATED at once" },
  { value: "STOP_FAIL", label: "Fail", description: "ends FAILED with the reason" },
];

export function StopModal({ flow, opened, onClose, onDone }: ActionProps) {
  const [mode, setMode] = useState<StopMode>("STOP_CANCEL");
  const [reason, setReason] = useState("");
  const action = useAction<object>();

  const submit = () => {
    const how = modes.find((m) => m.value === mode)?.label.toLowerCase();
    void action.send(
      (requestId) => stopFlow({ flowId: flow.flowId, runId: flow.runId, mode, reason, requestId }),
      () => onDone(`Stopped the run (${how}).`),
    );
  };

  return (
    <ActionModal
      opened={opened}
      onClose={onClose}
      title="Stop the run"
      action={action}
      submitLabel="Stop the run"
      danger
      onSubmit={submit}
      testId="stop-modal"
    >
      <Text size="sm">
        Run <Code>{flow.runId}</Code> of <Code>{flow.flowId}</Code>
      </Text>
      <Radio.Group label="How" value={mode} onChange={(v) => setMode(v as StopMode)} required>
        <Stack gap="xs" mt={4}>
          {modes.map((m, i) => (
            <Radio key={m.value} value={m.value} label={m.label} description={m.description} data-autofocus={i === 0 || undefined} />
          ))}
        </Stack>
      </Radio.Group>
      <Textarea label="Reason" autosize minRows={2} value={reason} onChange={(e) => setReason(e.currentTarget.value)} />
    </ActionModal>
  );
}
