// Set an Attribute: its key (the run's keys offered), an AttributeMap instance key, a type and a
// value, or delete it (a write without a value).
import { useState } from "react";
import { Autocomplete, Checkbox, NativeSelect, TextInput, Textarea } from "@mantine/core";
import { setAttributes } from "../../../api/calls";
import type { Attribute } from "../../../api/types";
import { attributeValueType } from "../../../format";
import { ActionModal } from "./ActionModal";
import type { ActionProps } from "./actionProps";
import { InputError, mono } from "./encode";
import { knownAttributeKeys } from "./knownNames";
import { useAction } from "./useAction";
import { type AttributeType, attributeTypeLabels, attributeTypes, toAttributeValue } from "./attributeValue";

export function SetAttributeModal({ flow, state, opened, onClose, onDone }: ActionProps) {
  const keys = knownAttributeKeys(state);
  const [key, setKey] = useState("");
  const [instanceKey, setInstanceKey] = useState("");
  const [type, setType] = useState<AttributeType>("string");
  const [value, setValue] = useState("");
  const [remove, setRemove] = useState(false);
  const action = useAction<{ runId: string }>();

  // A key the run has: its type is the declared one.
  const chooseKey = (k: string) => {
    setKey(k);
    const have = state?.attributes.find((a) => a.attribute?.key === k)?.attribute?.value;
    const t = attributeValueType(have) as AttributeType | "";
    if (t) {
      setType(t);
      if (t === "bool") setValue((v) => (v === "true" || v === "false" ? v : "true"));
    }
  };

  const submit = () => {
    const name = `${key.trim()}${instanceKey ? `[${instanceKey}]` : ""}`;
    void action.send((requestId) => {
      if (key.trim() === "") throw new InputError("name the Attribute's key");
      const write: Attribute = { key: key.trim(), instanceKey };
      if (!remove) write.value = toAttributeValue(type, type === "bool" && value === "" ? "true" : value);
      return setAttributes({ flow: { flowId: flow.flowId, runId: flow.runId }, writes: [write], requestId });
    }, () => onDone(remove ? `Deleted Attribute ${name}.` : `Set Attribute ${name}.`));
  };

  return (
    <ActionModal
      opened={opened}
      onClose={onClose}
      title="Set an Attribute"
      action={action}
      submitLabel={remove ? "Delete the Attribute" : "Set the Attribute"}
      danger={remove}
      onSubmit={submit}
      testId="attribute-modal"
    >
      <Autocomplete
        label="Key"
        required
        data-autofocus
        description="A key the Flow type declares"
        data={keys}
        value={key}
        onChange={chooseKey}
      />
      <TextInput
        label="Instance key"
        description="An AttributeMap's instance; empty for a plain Attribute"
        value={instanceKey}
        onChange={(e) => setInstanceKey(e.currentTarget.value)}
      />
      <Checkbox label="Delete it (write no value)" checked={remove} onChange={(e) => setRemove(e.currentTarget.checked)} />
      {!remove && (
        <>
          <NativeSelect
            label="Type"
            description="As the Flow type declares the key"
            data={attributeTypes.map((t) => ({ value: t, label: attributeTypeLabels[t] }))}
            value={type}
            onChange={(e) => {
              const t = e.currentTarget.value as AttributeType;
              setType(t);
              if (t === "bool") setValue("true");
            }}
          />
          {type === "bool" ? (
            <NativeSelect label="Value" data={["true", "false"]} value={value === "false" ? "false" : "true"} onChange={(e) => setValue(e.currentTarget.value)} />
          ) : type === "json" || type === "string" || type === "bytes" ? (
            <Textarea
              label="Value"
              description={
                type === "json"
                  ? "One JSON value: an object, an array, a string, a number, true, false or null"
                  : type === "bytes"
                    ? "Text, written as its UTF-8 bytes"
                    : undefined
              }
              autosize
              minRows={1}
              maxRows={8}
              styles={type === "json" ? mono : undefined}
              value={value}
              onChange={(e) => setValue(e.currentTarget.value)}
            />
          ) : (
            <TextInput
              label="Value"
              description={type === "datetime" ? "UTC, e.g. 2027-01-15T10:00:00Z, or Unix milliseconds" : undefined}
              value={value}
              onChange={(e) => setValue(e.currentTarget.value)}
            />
          )}
        </>
      )}
    </ActionModal>
  );
}
