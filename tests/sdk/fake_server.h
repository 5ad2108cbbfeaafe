// TEST TOOL: an in-process fake of the dex gRPC services on a loopback port,
// the test double for the SDK, dexcli and dex-flow-examples. It records what
// clients send and lets a test decide what the "server" answers: FlowTasks
// sent by hand, acks (auto or by hand, accepted or refused), dropped streams,
// cancel requests on heartbeats, canned runs. It has no engine behind it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "dex/api.grpc.pb.h"

namespace dex::testing {

// What the fake does with each FlowTaskResult it receives.
enum class AckMode { kNone, kAccept, kRefuse };

class FakeWorkerTaskService final : public WorkerTaskService::Service {
 public:
  grpc::Status PollWorkerTask(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* stream) override;

  struct ReceivedResult {
    flow::FlowTaskResult result;
    size_t stream_index;  // 0 for the first stream that said hello
  };

  // Waits until `count` streams in total have said hello.
  bool wait_for_streams(size_t count, Duration timeout);
  std::vector<WorkerHello> hellos() const;
  // Sends to the newest stream that is still open; false if there is none.
  bool send_task(const flow::FlowTask& task);
  // Cancels the newest open stream (the Worker sees the stream break).
  void drop_stream();
  // Waits for the `occurrence`-th result (from 1) for `task_id`.
  std::optional<ReceivedResult> wait_for_result(const std::string& task_id, Duration timeout,
                                                size_t occurrence = 1);
  size_t result_count(const std::string& task_id) const;
  size_t results_total() const;
  // Acks on the newest open stream.
  bool ack(const std::string& task_id, bool accepted, const std::string& reason = "");
  void set_ack_mode(AckMode mode);
  std::optional<TaskHeartbeat> wait_for_heartbeat(const std::string& task_id, Duration timeout);
  // Answer every heartbeat with cancel_requested = true.
  void set_cancel_on_heartbeat(bool cancel);
  // How often each open stream gets a Ping, as the real server sends them
  // (1 s, like EngineOptions::worker_ping_interval); zero: never (a process
  // that froze after its HelloAck).
  void set_ping_interval(Duration interval);
  // Called with "hello:<worker id>" when a stream says hello.
  std::function<void(const std::string&)> on_event;

 private:
  struct Stream {
    grpc::ServerContext* context;
    grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* rw;
    std::mutex write_mu;
    bool done = false;  // protected by write_mu; no writes once the handler returned
    bool write(const ServerMessage& message);
  };
  std::shared_ptr<Stream> newest_open();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Stream>> streams_;
  std::vector<WorkerHello> hellos_;
  std::vector<ReceivedResult> results_;
  std::vector<TaskHeartbeat> heartbeats_;
  AckMode ack_mode_ = AckMode::kAccept;
  bool cancel_on_heartbeat_ = false;
  Duration ping_interval_ = seconds(1);
};

// dex.FlowService with canned answers:
//   StartFlow: records the request; a Flow type named "undeclared" is refused
//     with INVALID_ARGUMENT; otherwise answers run ID "run-<n>" (n from 1);
//   DescribeFlow "f-done": a COMPLETED run of "Echo" with one output; "slow":
//     answers after 3 s (or when the call is cancelled); anything else NOT_FOUND;
//   WaitForFlow "f-done": closed; others: waits timeout_ms (at most 3 s), closed = false;
//   StopFlow, PublishToChannel, SkipTimer: record the request;
//   UpdateFlowConfig: records the request; answers its config.
//   TimeTravel: records the request; answers run "traveled-<n>" (n from 1),
//     a dry run also a start whose description names the request's run;
//   GetFlowState, GetHistoryEvents: "f-done"'s, recording the request;
//   GetAttributes: the Attributes set_attributes_answer() gave (those of the
//     requested keys), run "run-attrs" RUNNING; "missing": NOT_FOUND;
//   SetAttributes: "f-done": FAILED_PRECONDITION; a write of key "undeclared":
//     INVALID_ARGUMENT; otherwise run "run-1";
//   WaitForAttribute: "f-done": matched = false, COMPLETED; matched when the
//     answer's value of (key, instance) equals the request's; otherwise waits
//     timeout_ms (at most 3 s), matched = false;
//   InvokeRpc: "f-done": FAILED_PRECONDITION (closed run); name "undeclared":
//     INVALID_ARGUMENT; "fail": FAILED_PRECONDITION with a handler's message;
//     "slow": waits timeout_ms (at most 3 s), DEADLINE_EXCEEDED; "unavailable":
//     UNAVAILABLE (the process changed); "text": the output "just text";
//     otherwise {"rpc": name, "input": input}. All record the request;
//   SearchFlows: pages over the rows set_search_rows() gave (page_size 0:
//     100; the token "at:<offset>"; applied_slot 42), recording the request;
//     a query starting "Nope": INVALID_ARGUMENT naming position 1; a page
//     size outside 0..1000 or another token: INVALID_ARGUMENT; the query
//     "unavailable": UNAVAILABLE.
class FakeFlowService final : public FlowService::Service {
 public:
  grpc::Status StartFlow(grpc::ServerContext*, const flow::StartFlowRequest*,
                         flow::StartFlowResponse*) override;
  grpc::Status StopFlow(grpc::ServerContext*, const flow::StopFlowRequest*,
                        flow::StopFlowResponse*) override;
  grpc::Status PublishToChannel(grpc::ServerContext*, const flow::PublishToChannelRequest*,
                                flow::PublishToChannelResponse*) override;
  grpc::Status SkipTimer(grpc::ServerContext*, const flow::SkipTimerRequest*,
                         flow::SkipTimerResponse*) override;
  grpc::Status TimeTravel(grpc::ServerContext*, const flow::TimeTravelRequest*,
                          flow::TimeTravelResponse*) override;
  grpc::Status UpdateFlowConfig(grpc::ServerContext*, const flow::UpdateFlowConfigRequest*,
                                flow::UpdateFlowConfigResponse*) override;
  grpc::Status DescribeFlow(grpc::ServerContext*, const flow::FlowRef*,
                            flow::FlowDescription*) override;
  grpc::Status GetFlowState(grpc::ServerContext*, const flow::FlowRef*,
                            flow::GetFlowStateResponse*) override;
  grpc::Status GetHistoryEvents(grpc::ServerContext*, const flow::GetHistoryEventsRequest*,
                                flow::GetHistoryEventsResponse*) override;
  grpc::Status WaitForFlow(grpc::ServerContext*, const flow::WaitForFlowRequest*,
                           flow::WaitForFlowResponse*) override;
  grpc::Status GetAttributes(grpc::ServerContext*, const flow::GetAttributesRequest*,
                             flow::GetAttributesResponse*) override;
  grpc::Status SetAttributes(grpc::ServerContext*, const flow::SetAttributesRequest*,
                             flow::SetAttributesResponse*) override;
  grpc::Status WaitForAttribute(grpc::ServerContext*, const flow::WaitForAttributeRequest*,
                                flow::WaitForAttributeResponse*) override;
  grpc::Status InvokeRpc(grpc::ServerContext*, const flow::InvokeRpcRequest*,
                         flow::InvokeRpcResponse*) override;
  grpc::Status SearchFlows(grpc::ServerContext*, const flow::SearchFlowsRequest*,
                           flow::SearchFlowsResponse*) override;

  static flow::FlowDescription completed_run();

  std::vector<flow::StartFlowRequest> starts() const;
  std::vector<flow::StopFlowRequest> stops() const;
  std::vector<flow::PublishToChannelRequest> publishes() const;
  std::vector<flow::SkipTimerRequest> skips() const;
  std::vector<flow::TimeTravelRequest> travels() const;
  std::vector<flow::UpdateFlowConfigRequest> config_updates() const;
  std::vector<flow::GetHistoryEventsRequest> history_requests() const;
  std::vector<flow::FlowRef> state_requests() const;
  std::vector<flow::GetAttributesRequest> attribute_gets() const;
  std::vector<flow::SetAttributesRequest> attribute_sets() const;
  std::vector<flow::WaitForAttributeRequest> attribute_waits() const;
  std::vector<flow::InvokeRpcRequest> rpcs() const;
  void set_attributes_answer(std::vector<flow::Attribute> attributes);
  std::vector<flow::SearchFlowsRequest> searches() const;
  void set_search_rows(std::vector<flow::FlowSearchRow> rows);
  size_t calls() const;

 private:
  mutable std::mutex mu_;
  std::vector<flow::StartFlowRequest> starts_;
  std::vector<flow::StopFlowRequest> stops_;
  std::vector<flow::PublishToChannelRequest> publishes_;
  std::vector<flow::SkipTimerRequest> skips_;
  std::vector<flow::TimeTravelRequest> travels_;
  std::vector<flow::UpdateFlowConfigRequest> config_updates_;
  std::vector<flow::GetHistoryEventsRequest> history_requests_;
  std::vector<flow::FlowRef> state_requests_;
  std::vector<flow::GetAttributesRequest> attribute_gets_;
  std::vector<flow::SetAttributesRequest> attribute_sets_;
  std::vector<flow::WaitForAttributeRequest> attribute_waits_;
  std::vector<flow::InvokeRpcRequest> rpcs_;
  std::vector<flow::Attribute> attributes_;
  std::vector<flow::SearchFlowsRequest> searches_;
  std::vector<flow::FlowSearchRow> search_rows_;
  size_t calls_ = 0;
};

class FakeAdminService final : public AdminService::Service {
 public:
  grpc::Status Describe(grpc::ServerContext*, const DescribeRequest*, DescribeResponse*) override;
  std::string last_authorization() const;

 private:
  mutable std::mutex mu_;
  std::string last_authorization_;
};

// A gRPC server on 127.0.0.1 serving the three fakes. Port 0 picks a free port.
class FakeServer {
 public:
  FakeServer(FakeWorkerTaskService& workers, FakeFlowService& flows, FakeAdminService& admin,
             int port = 0);
  ~FakeServer();
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Cancels open calls and stops listening. Idempotent.
  void stop();

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace dex::testing
