// The Run view's "Actions" menu: each item opens its action's modal (the form is the confirmation;
// nothing is sent before its button). After a success the menu says what was done and the view
// reads the run again. The writes other than time travel need a RUNNING run.
import { useRef, useState } from "react";
import { Button, Group, Menu, Text } from "@mantine/core";
import type { FlowDescription, GetFlowStateResponse } from "../../../api/types";
import type { ActionProps } from "./actionProps";
import { PublishModal } from "./PublishModal";
import { SkipTimerModal } from "./SkipTimerModal";
import { InvokeRpcModal } from "./InvokeRpcModal";
import { SetAttributeModal } from "./SetAttributeModal";
import { StopModal } from "./StopModal";
import { TimeTravelModal } from "./TimeTravelModal";

type Name = "publish" | "skip" | "rpc" | "attribute" | "stop" | "travel";

const items: { name: Name; label: string; needsRunning: boolean; modal: (p: ActionProps) => React.ReactNode }[] = [
  { name: "publish", label: "Publish to a Channel…", needsRunning: true, modal: PublishModal },
  { name: "skip", label: "Skip a Timer…", needsRunning: true, modal: SkipTimerModal },
  { name: "rpc", label: "Invoke an RPC…", needsRunning: true, modal: InvokeRpcModal },
  { name: "attribute", label: "Set an Attribute…", needsRunning: true, modal: SetAttributeModal },
  { name: "stop", label: "Stop the run…", needsRunning: true, modal: StopModal },
  { name: "travel", label: "Time travel…", needsRunning: false, modal: TimeTravelModal },
];

export function RunActions({
  flow,
  state,
  onDone,
}: {
  flow: FlowDescription;
  state: GetFlowStateResponse | undefined;
  onDone: () => void;
}) {
  const [open, setOpen] = useState<Name | null>(null);
  // Each opening starts from an empty form (a new key); closing keeps the key, so the modal's
  // close returns the focus to the menu.
  const [openings, setOpenings] = useState<Partial<Record<Name, number>>>({});
  const [done, setDone] = useState("");
  const running = flow.status === "FLOW_RUNNING";
  const menuButton = useRef<HTMLButtonElement>(null);
  const close = () => {
    setOpen(null);
    setTimeout(() => menuButton.current?.focus(), 0);
  };

  return (
    <Group gap="xs" wrap="nowrap">
      <Text size="xs" c="dimmed" role="status" data-testid="action-done">
        {done}
      </Text>
      <Menu position="bottom-end" withinPortal>
        <Menu.Target>
          <Button size="xs" data-testid="actions-menu" ref={menuButton}>
            Actions
          </Button>
        </Menu.Target>
        <Menu.Dropdown aria-label="Actions on this run">
          {items.map((it) => (
            <Menu.Item
              key={it.name}
              disabled={it.needsRunning && !running}
              color={it.name === "stop" ? "red" : undefined}
              onClick={() => {
                setDone("");
                setOpenings((o) => ({ ...o, [it.name]: (o[it.name] ?? 0) + 1 }));
                setOpen(it.name);
              }}
            >
              {it.label}
            </Menu.Item>
          ))}
          {!running && (
            <Menu.Label>The run is closed: only time travel applies.</Menu.Label>
          )}
        </Menu.Dropdown>
      </Menu>
      {items.map((it) => {
        const Modal = it.modal;
        return (
          <Modal
            key={`${it.name}-${openings[it.name] ?? 0}`}
            flow={flow}
            state={state}
            opened={open === it.name}
            onClose={close}
            onDone={(message) => {
              setDone(message);
              if (it.name !== "rpc") close();
              onDone();
            }}
          />
        );
      })}
    </Group>
  );
}
