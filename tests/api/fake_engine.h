// A fake Engine for the API's tests (api_server_test.cc, api_access_test.cc):
// each call answers a fixed result or error, the Worker stream's calls record
// what they were given.
#pragma once

#include <future>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace dex {

class FakeEngine final : public Engine {
 public:
  void stop() override {}
  std::string local_store_report() const override { return "fake"; }
  StatusOr<SnapshotInfo> snapshot_now() override { return Status::stopped("fake"); }
  SnapshotStats snapshot_stats() const override { return {}; }
  StatusOr<flow::StartFlowResponse> start_flow(const flow::StartFlowRequest& request) override {
    if (request.flow_id() == "taken") {
      return Status::already_exists("Flow ID 'taken' has a running run");
    }
    flow::StartFlowResponse response;
    response.set_run_id("run-of-" + request.flow_id());
    return response;
  }
  Status stop_flow(const flow::StopFlowRequest&) override {
    return Status::corruption("bad bytes");
  }
  Status publish(const flow::PublishToChannelRequest& request) override {
    return Status::invalid_argument("Channel '" + request.channel() + "' is not declared");
  }
  Status skip_timer(const flow::SkipTimerRequest&) override {
    return Status::precondition_failed("the Timer already fired");
  }
  StatusOr<flow::TimeTravelResponse> time_travel(const flow::TimeTravelRequest& r) override {
    return Status::precondition_failed("run '" + r.flow().run_id() + "' is not the latest run");
  }
  StatusOr<flow::TriggerContinueAsNewResponse> continue_as_new(
      const flow::TriggerContinueAsNewRequest& r) override {
    return Status::precondition_failed("run '" + r.flow().run_id() + "' is COMPLETED");
  }
  StatusOr<flow::UpdateFlowConfigResponse> update_flow_config(
      const flow::UpdateFlowConfigRequest& r) override {
    return Status::precondition_failed("run '" + r.flow().run_id() +
                                       "' is COMPLETED: only a running run's FlowConfig changes");
  }
  StatusOr<flow::FlowDescription> describe_flow(const flow::FlowRef&) override {
    return Status::stopped("engine stopped");
  }
  StatusOr<flow::GetFlowStateResponse> flow_state(const flow::FlowRef& ref) override {
    return Status::not_found("no Flow '" + ref.flow_id() + "'");
  }
  StatusOr<flow::GetHistoryEventsResponse> history(const flow::GetHistoryEventsRequest&) override {
    return flow::GetHistoryEventsResponse();
  }
  // Sleeps (real time) to the timeout and answers "not closed".
  StatusOr<flow::WaitForFlowResponse> wait_for_flow(const flow::WaitForFlowRequest& request,
                                                    const std::function<bool()>&) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(request.timeout_ms()));
    flow::WaitForFlowResponse response;
    response.set_closed(false);
    response.mutable_flow()->set_flow_id(request.flow().flow_id());
    response.mutable_flow()->set_run_id(request.flow().run_id());
    return response;
  }
  StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(
      const flow::WaitForHistoryEventRequest&, const std::function<bool()>&) override {
    return flow::GetHistoryEventsResponse();
  }
  StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(
      const flow::WaitForStepCompletionRequest&, const std::function<bool()>&) override {
    return flow::WaitForStepCompletionResponse();
  }
  StatusOr<flow::GetAttributesResponse> get_attributes(const flow::GetAttributesRequest&) override {
    return flow::GetAttributesResponse();
  }
  StatusOr<flow::SearchFlowsResponse> search_flows(const flow::SearchFlowsRequest&) override {
    return flow::SearchFlowsResponse();
  }
  StatusOr<flow::ListSearchKeysResponse> list_search_keys(
      const flow::ListSearchKeysRequest&) override {
    flow::ListSearchKeysResponse response;
    auto* key = response.add_keys();
    key->set_name("customer");
    key->set_type(flow::INDEX_KEYWORD);
    key->add_flow_types("Order");
    response.set_applied_slot(7);
    return response;
  }
  StatusOr<flow::ListSearchValuesResponse> list_search_values(
      const flow::ListSearchValuesRequest& request) override {
    if (request.key() != "customer")
      return Status::invalid_argument("key '" + request.key() + "' is DOUBLE");
    flow::ListSearchValuesResponse response;
    response.add_values(request.prefix() + "me");
    return response;
  }
  StatusOr<flow::SetAttributesResponse> set_attributes(const flow::SetAttributesRequest&) override {
    return flow::SetAttributesResponse();
  }
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const flow::WaitForAttributeRequest&, const std::function<bool()>&) override {
    return flow::WaitForAttributeResponse();
  }
  StatusOr<flow::InvokeRpcResponse> invoke_rpc(const flow::InvokeRpcRequest&,
                                               const std::function<bool()>&) override {
    // An RPC whose caller's deadline passed: the API maps it to DEADLINE_EXCEEDED.
    return Status(Code::kDeadlineExceeded, "fake: the RPC timed out");
  }
  StatusOr<WorkerHandle> connect_worker(const WorkerHello& hello,
                                        std::shared_ptr<WorkerSink> sink) override {
    std::lock_guard<std::mutex> lock(mu);
    last_hello = hello;
    this->sink = std::move(sink);
    return WorkerHandle{7};
  }
  void disconnect_worker(WorkerHandle worker) override {
    std::lock_guard<std::mutex> lock(mu);
    disconnected = worker;
  }
  HeartbeatAck heartbeat(WorkerHandle, const TaskHeartbeat& heartbeat) override {
    HeartbeatAck ack;
    ack.set_task_id(heartbeat.task_id());
    ack.set_cancel_requested(heartbeat.task_id() == "cancel-me");
    return ack;
  }
  std::future<ResultAck> complete_task(WorkerHandle, const flow::FlowTaskResult& result) override {
    std::promise<ResultAck> promise;
    if (result.task_id() == "engine-stopped") {
      promise.set_exception(std::make_exception_ptr(std::runtime_error("stopped")));
    } else {
      ResultAck ack;
      ack.set_task_id(result.task_id());
      ack.set_accepted(result.task_id() != "stale");
      promise.set_value(ack);
    }
    return promise.get_future();
  }

  std::mutex mu;
  WorkerHello last_hello;
  std::shared_ptr<WorkerSink> sink;
  WorkerHandle disconnected = 0;
};

}  // namespace dex
