// Invoke an RPC: its name, a JSON input, the call's own lock keys; the answer's output is shown
// (its Payload decoded as JSON text).
import { useState } from "react";
import { Stack, Text, TextInput, Textarea } from "@mantine/core";
import { invokeRpc } from "../../../api/calls";
import type { InvokeRpcResponse } from "../../../api/types";
import { prettyJson } from "../../../format";
import { JsonBlock } from "../../../components/JsonBlock";
import { ActionModal } from "./ActionModal";
import type { ActionProps } from "./actionProps";
import { InputError, base64ToText, jsonPayload, mono } from "./encode";
import { useAction } from "./useAction";

export function InvokeRpcModal({ flow, opened, onClose, onDone }: ActionProps) {
  const [name, setName] = useState("");
  const [input, setInput] = useState("{}");
  const [lockKeys, setLockKeys] = useState("");
  const [output, setOutput] = useState<{ name: string; text: string }>();
  const action = useAction<InvokeRpcResponse>();

  const submit = () => {
    setOutput(undefined);
    const rpc = name.trim();
    void action.send((requestId) => {
      if (name.trim() === "") throw new InputError("name the RPC");
      const keys = lockKeys.split(",").map((k) => k.trim()).filter((k) => k !== "");
      return invokeRpc({
        flow: { flowId: flow.flowId, runId: flow.runId },
        name: name.trim(),
        input: jsonPayload(input, "the input"),
        lockKeys: keys,
        requestId,
      });
    }, (r) => {
      setOutput({ name: rpc, text: r.output?.data ? prettyJson(base64ToText(r.output.data)) : "(no output)" });
      onDone(`RPC ${rpc} answered.`);
    });
  };

  return (
    <ActionModal
      opened={opened}
      onClose={onClose}
      title="Invoke an RPC"
      action={action}
      submitLabel={output ? "Invoke again" : "Invoke"}
      onSubmit={submit}
      testId="rpc-modal"
      result={
        output && (
          <Stack gap={4} data-testid="rpc-output">
            <Text size="sm" fw={600} role="status">
              {output.name} answered:
            </Text>
            <JsonBlock value={output.text} label={`The output of RPC ${output.name}`} />
          </Stack>
        )
      }
    >
      <TextInput label="RPC name" required data-autofocus value={name} onChange={(e) => setName(e.currentTarget.value)} />
      <Textarea
        label="Input (JSON)"
        autosize
        minRows={3}
        maxRows={10}
        styles={mono}
        value={input}
        onChange={(e) => setInput(e.currentTarget.value)}
      />
      <TextInput
        label="Lock keys"
        description="Held by this call besides the RPC's declared ones; comma-separated, may be empty"
        value={lockKeys}
        onChange={(e) => setLockKeys(e.currentTarget.value)}
      />
    </ActionModal>
  );
}
