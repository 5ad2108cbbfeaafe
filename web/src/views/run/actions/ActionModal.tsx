// The frame of every action: a modal (focus kept inside, Escape or Cancel closes it, the focus goes
// back to the Actions menu) holding the action's form; its button sends it. A refusal shows the
// server's code and message; a send whose answer was lost can be sent again with its request ID.
// Where the server has admin credentials configured and this tab holds none, the modal asks for
// an admin token first and checks it with the server before the action is sent.
import { useEffect, useState } from "react";
import type { FormEvent, ReactNode } from "react";
import { Button, Group, Modal, PasswordInput, Stack, Text } from "@mantine/core";
import { ErrorAlert } from "../../../components/ErrorAlert";
import { getToken, onTokenChange, setToken } from "../../../api/credential";
import { checkAdminToken, serverWantsAdminToken } from "./adminToken";
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
  const gate = useAdminTokenGate(opened);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (action.busy || gate.checking) return;
    if (!gate.needed) {
      onSubmit();
      return;
    }
    void gate.accept().then((ok) => {
      if (ok) onSubmit();
    });
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
          {gate.needed && (
            <PasswordInput
              label="Admin token"
              description="This server asks for an admin credential before a run is changed. It is checked, then kept in this tab only."
              value={gate.draft}
              onChange={(e) => gate.setDraft(e.currentTarget.value)}
              error={gate.error}
              data-testid="action-admin-token"
              required
            />
          )}
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
            <Button type="submit" color={danger ? "red" : undefined} loading={action.busy || gate.checking} variant={extraButtons ? "default" : "filled"}>
              {submitLabel}
            </Button>
            {extraButtons}
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

/** The admin-token step of an action: needed while the server wants one and the tab has none. */
function useAdminTokenGate(opened: boolean) {
  const [wanted, setWanted] = useState(false);
  const [held, setHeld] = useState(getToken() !== "");
  const [draft, setDraft] = useState("");
  const [error, setError] = useState<string>();
  const [checking, setChecking] = useState(false);
  useEffect(() => onTokenChange(() => setHeld(getToken() !== "")), []);
  useEffect(() => {
    if (!opened) return;
    let live = true;
    void serverWantsAdminToken().then((w) => live && setWanted(w));
    return () => {
      live = false;
    };
  }, [opened]);
  const accept = async (): Promise<boolean> => {
    const token = draft.trim();
    if (token === "") {
      setError("Enter an admin token: this server needs one to change a run");
      return false;
    }
    setChecking(true);
    setError(undefined);
    try {
      await checkAdminToken(token);
      setToken(token);
      setDraft("");
      return true;
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      return false;
    } finally {
      setChecking(false);
    }
  };
  return {
    needed: wanted && !held,
    draft,
    setDraft: (v: string) => {
      setDraft(v);
      setError(undefined);
    },
    error,
    checking,
    accept,
  };
}
