// What each action's modal gets from the Run view's Actions menu.
import type { FlowDescription, GetFlowStateResponse } from "../../../api/types";

export interface ActionProps {
  /** The run shown: every action names exactly this run. */
  flow: FlowDescription;
  state: GetFlowStateResponse | undefined;
  opened: boolean;
  onClose: () => void;
  /** The action succeeded: `message` says what was done; the view reads the run again. */
  onDone: (message: string) => void;
}
