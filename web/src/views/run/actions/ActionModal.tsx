// The frame of every action: a modal (focus kept inside, Escape or Cancel closes it, the focus goes
// back to the Actions menu) holding the action's form; its button sends it. A refusal shows the
// server's code and message; a send whose answer was lost can be sent again with its request ID.
import type { FormEvent, ReactNode } from "react";
import { Button, Group, Modal, Stack, Text } from "@mantine/core";
import { ErrorAlert } from "../../../components/ErrorAlert";
import { InputError } from "./encode";
import type { Action } from "./useAction";

export interface ActionModalProps<T> {
  opened: boolean;
  onClose: () => void;
  title: string;
  action: Action<T>;
  submitLabel: string;
  onSubmit: () => void;
  danger?: boolean;
  size?: string | number;
  testId: string;
  children: ReactNode;
  /** Shown under the form (an RPC's output, a time travel's preview). */
  result?: ReactNode;
  /** Replaces the submit button (a time travel's "Travel" after its preview). */
  extraButtons?: ReactNode;
}

export function ActionModal<T>(props: ActionModalProps<T>) {
  const { opened, onClose, title, action, submitLabel, onSubmit, danger, size, testId, children, result, extraButtons } =
    props;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!action.busy) onSubmit();
  };
  const local = action.error instanceof InputError;
  return (
    <Modal
      opened={opened}
      onClose={onClose}
      title={title}
      size={size ?? "lg"}
      data-testid={testId}
      closeButtonProps={{ "aria-label": "Close" }}
      // The Actions menu's button takes the focus back (the menu item that opened it is gone).
      returnFocus={false}
    >
      <form onSubmit={submit} noValidate>
        <Stack gap="sm">
          {children}
          {action.error !== undefined && (
            <ErrorAlert
              error={action.error}
              title={
                local
                  ? "Not sent"
                  : action.canRetry
                    ? "No answer: it may or may not have been done"
                    : "The server refused it"
              }
            />
          )}
          {action.canRetry && (
            <Group gap="xs">
              <Button variant="default" size="xs" onClick={() => void action.retry()} loading={action.busy}>
                Send it again (same request ID)
              </Button>
              <Text size="xs" c="dimmed" ff="monospace">
                {action.requestId}
              </Text>
            </Group>
          )}
          {result}
          <Group justify="flex-end" gap="xs">
            <Button variant="default" onClick={onClose}>
              {result ? "Close" : "Cancel"}
            </Button>
            <Button type="submit" color={danger ? "red" : undefined} loading={action.busy} variant={extraButtons ? "default" : "filled"}>
              {submitLabel}
            </Button>
            {extraButtons}
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}
