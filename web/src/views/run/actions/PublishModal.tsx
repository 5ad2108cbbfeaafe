// Publish to a Channel: a Channel (the run's known ones offered, any name allowed), an instance key
// for a ChannelMap, one or more JSON messages (each a Payload: base64 of its JSON text).
import { useState } from "react";
import { ActionIcon, Autocomplete, Button, Group, Text, Textarea } from "@mantine/core";
import { publishToChannel } from "../../../api/calls";
import { ActionModal } from "./ActionModal";
import type { ActionProps } from "./actionProps";
import { InputError, jsonPayload, mono } from "./encode";
import { knownChannels } from "./knownNames";
import { useAction } from "./useAction";

export function PublishModal({ flow, state, opened, onClose, onDone }: ActionProps) {
  const known = knownChannels(state);
  const [channel, setChannel] = useState(known.size === 1 ? [...known.keys()][0] : "");
  const [instanceKey, setInstanceKey] = useState("");
  const [messages, setMessages] = useState<string[]>(["{}"]);
  const action = useAction<object>();

  const submit = () => {
    const n = messages.length;
    const name = `${channel}${instanceKey ? `[${instanceKey}]` : ""}`;
    void action.send((requestId) => {
      if (channel.trim() === "") throw new InputError("name the Channel");
      const payloads = messages.map((m, i) => jsonPayload(m, `message ${i + 1}`));
      return publishToChannel({ flowId: flow.flowId, runId: flow.runId, channel, instanceKey, messages: payloads, requestId });
    }, () => onDone(`Published ${n} message${n === 1 ? "" : "s"} to ${name}.`));
  };
  const setMessage = (i: number, v: string) => setMessages((ms) => ms.map((m, j) => (j === i ? v : m)));

  return (
    <ActionModal
      opened={opened}
      onClose={onClose}
      title="Publish to a Channel"
      action={action}
      submitLabel="Publish"
      onSubmit={submit}
      testId="publish-modal"
    >
      <Autocomplete
        label="Channel"
        required
        data-autofocus
        description={known.size ? "The Channels the run waits on or holds messages for; any other name may be typed" : "The Channel's declared name"}
        data={[...known.keys()]}
        value={channel}
        onChange={setChannel}
      />
      <Autocomplete
        label="Instance key"
        description="A ChannelMap's instance; empty for a plain Channel"
        data={known.get(channel) ?? []}
        value={instanceKey}
        onChange={setInstanceKey}
      />
      {messages.map((m, i) => (
        <Group key={i} align="flex-end" gap="xs" wrap="nowrap">
          <Textarea
            style={{ flex: 1 }}
            label={`Message ${i + 1} (JSON)`}
            autosize
            minRows={2}
            maxRows={8}
            styles={mono}
            value={m}
            onChange={(e) => setMessage(i, e.currentTarget.value)}
          />
          {messages.length > 1 && (
            <ActionIcon
              variant="default"
              size="lg"
              aria-label={`Remove message ${i + 1}`}
              onClick={() => setMessages((ms) => ms.filter((_, j) => j !== i))}
            >
              ×
            </ActionIcon>
          )}
        </Group>
      ))}
      <Group justify="space-between">
        <Button variant="subtle" size="xs" onClick={() => setMessages((ms) => [...ms, "{}"])}>
          Add a message
        </Button>
        <Text size="xs" c="dimmed">
          The messages are appended in this order, in one request.
        </Text>
      </Group>
    </ActionModal>
  );
}
