// RPCs: handlers declared on a Flow that Clients invoke on a RUNNING run
// (Client.invokeRpc). A handler runs on a Worker as a task of method RPC,
// reads the Attributes it declares, and returns an output and new Step
// executions; its Attribute writes and publishes are applied with them. The
// server never retries an RPC: a thrown error reaches the caller as
// FAILED_PRECONDITION with its message.
import type { WireFlowTask } from "../proto";
import { type AttributeRef, attributeKeyOf, AttributeStore } from "./attributes";
import { checkName, invalid } from "./checks";
import { jsonCodec, type Codec } from "./codec";
import { TaskContext } from "./context";
import type { StepMovement } from "./decisions";
import { checkLockKeys } from "./options";

/** What a handler returns: its output (for the caller) and new Step executions. */
export interface RpcResult<O = unknown> {
  output?: O;
  /** Started with the RPC's result (scheduled by "rpc:<name>"). */
  nextSteps?: StepMovement[];
}

export interface RpcDefinition<I = unknown, O = unknown> {
  /** The RPC's name, unique in its Flow. */
  name: string;
  /** Runs once per invocation; may be async. Returning nothing: no output, no Steps. */
  handler(ctx: RpcContext<I>, input: I): RpcResult<O> | void | Promise<RpcResult<O> | void>;
  /** As MethodOptions.lockKeys: held while the handler runs. */
  lockKeys?: string[];
  /** The Attributes the handler reads. Default: every key its Flow declares. */
  attributeReads?: AttributeRef[];
  /** How the input becomes bytes and back. Default: JSON. */
  inputCodec?: Codec<I>;
  /** How the output becomes bytes and back. Default: JSON. */
  outputCodec?: Codec<O>;
}

/**
 * An RPC of a Flow: put it in FlowDefinition.rpcs on the Worker's side and
 * pass it to Client.invokeRpc for typed inputs and outputs (its codecs).
 */
export class Rpc<I = unknown, O = unknown> {
  readonly name: string;
  readonly lockKeys: readonly string[];
  /** undefined: every declared key. */
  readonly attributeReads: readonly string[] | undefined;
  readonly inputCodec: Codec<I>;
  readonly outputCodec: Codec<O>;
  readonly handler: RpcDefinition<I, O>["handler"];

  /** Throws a DexError (INVALID_ARGUMENT) naming what is wrong. */
  constructor(definition: RpcDefinition<I, O>) {
    if (typeof definition !== "object" || definition === null) throw invalid("an RPC needs a definition { name, handler }");
    this.name = checkName(definition.name, "an RPC name");
    const what = `RPC '${this.name}'`;
    if (typeof definition.handler !== "function") throw invalid(`${what}: handler is not a function`);
    this.handler = definition.handler;
    this.lockKeys = definition.lockKeys === undefined ? [] : checkLockKeys(definition.lockKeys, `${what}: lockKeys`);
    if (definition.attributeReads !== undefined) {
      if (!Array.isArray(definition.attributeReads)) throw invalid(`${what}: attributeReads must be an array`);
      this.attributeReads = definition.attributeReads.map((r, i) => attributeKeyOf(r, `${what}: attributeReads[${i}]`));
    } else {
      this.attributeReads = undefined;
    }
    this.inputCodec = definition.inputCodec ?? (jsonCodec as Codec<I>);
    this.outputCodec = definition.outputCodec ?? (jsonCodec as Codec<O>);
  }
}

/** An RPC handler's environment. */
export class RpcContext<I = unknown> extends TaskContext {
  /** The RPC's ID (the task's step execution ID). */
  readonly rpcId: string;
  readonly rpcName: string;
  readonly input: I;

  /** @internal */
  constructor(task: WireFlowTask, input: I, signal: AbortSignal, heartbeat: () => boolean, attributes: AttributeStore) {
    super(task, signal, heartbeat, attributes);
    this.rpcId = task.stepExecutionId;
    this.rpcName = task.rpcName;
    this.input = input;
  }
}
