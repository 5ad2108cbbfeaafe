// A gRPC server with dex's services (api.proto), in process, instead of a dex
// server: it records the hellos, results and calls it receives, answers what
// a test says, and sends FlowTasks to the Worker. For the wire tests.
import * as grpc from "@grpc/grpc-js";

import { services } from "../src/proto";
import { eventually } from "./helpers";

type Answer = unknown | { error: { code: grpc.status; details: string } };

/** A gRPC server with dex's services: records what it receives and answers what the test says. */
export class FakeDex {
  private readonly server = new grpc.Server();
  address = "";
  readonly hellos: any[] = [];
  readonly results: any[] = [];
  readonly calls: { method: string; request: any }[] = [];
  readonly answers = new Map<string, (request: any) => Answer>();
  private stream: grpc.ServerDuplexStream<any, any> | undefined;
  private readonly pinger: NodeJS.Timeout;

  constructor() {
    const { FlowService, WorkerTaskService } = services();
    this.server.addService(WorkerTaskService.service, {
      PollWorkerTask: (call: grpc.ServerDuplexStream<any, any>) => {
        call.on("data", (m: any) => {
          if (m.hello) {
            this.hellos.push(m.hello);
            this.stream = call;
            call.write({ helloAck: { nodeId: "fake", nodeEpoch: "1" } });
          } else if (m.flowResult) {
            this.results.push(m.flowResult);
            call.write({ resultAck: { taskId: m.flowResult.taskId, accepted: true, reason: "" } });
          }
        });
        call.on("error", () => undefined);
        call.on("end", () => call.end());
      },
    });
    const flowHandlers: grpc.UntypedServiceImplementation = {};
    for (const method of Object.keys(FlowService.service)) {
      flowHandlers[method] = (call: grpc.ServerUnaryCall<any, any>, callback: grpc.sendUnaryData<any>) => {
        this.calls.push({ method, request: call.request });
        const answer = this.answers.get(method)?.(call.request) ?? {};
        const error = (answer as { error?: { code: grpc.status; details: string } }).error;
        if (error !== undefined) callback({ code: error.code, details: error.details, metadata: new grpc.Metadata() } as grpc.ServiceError);
        else callback(null, answer);
      };
    }
    this.server.addService(FlowService.service, flowHandlers);
    // The Worker gives up a stream silent for 3 s.
    this.pinger = setInterval(() => this.stream?.write({ ping: {} }), 500);
  }

  async start(): Promise<void> {
    const port = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    this.address = `127.0.0.1:${port}`;
  }

  /** Sends a FlowTask to the Worker and resolves with its result. */
  async task(over: Record<string, unknown>): Promise<any> {
    const taskId = `t-${this.results.length}-${Math.random()}`;
    this.stream?.write({
      flowTask: {
        taskId,
        flowId: "f-1",
        runId: "r-1",
        flowType: "Shop",
        declarationVersion: 1,
        attempt: 1,
        firstAttemptUnixMs: Date.now(),
        attemptTimeoutMs: 10_000,
        ...over,
      },
    });
    let result: any;
    await eventually(`the result of ${taskId}`, () => (result = this.results.find((r) => r.taskId === taskId)) !== undefined);
    return result;
  }

  lastCall(method: string): any {
    return [...this.calls].reverse().find((c) => c.method === method)?.request;
  }

  stop(): void {
    clearInterval(this.pinger);
    this.server.forceShutdown();
  }
}
