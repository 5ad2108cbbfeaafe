#include "fake_server.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <thread>

namespace dex::testing {

namespace {

std::chrono::system_clock::time_point deadline_after(Duration d) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

}  // namespace

// ------------------------------------------------------ FakeWorkerTaskService

bool FakeWorkerTaskService::Stream::write(const ServerMessage& message) {
  std::lock_guard<std::mutex> lock(write_mu);
  if (done) return false;
  return rw->Write(message);
}

grpc::Status FakeWorkerTaskService::PollWorkerTask(
    grpc::ServerContext* context, grpc::ServerReaderWriter<ServerMessage, WorkerMessage>* rw) {
  WorkerMessage first;
  if (!rw->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no hello");
  if (!first.has_hello()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the first message must be a hello");
  }
  auto stream = std::make_shared<Stream>();
  stream->context = context;
  stream->rw = rw;
  size_t index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = streams_.size();
    streams_.push_back(stream);
    hellos_.push_back(first.hello());
  }
  if (on_event) on_event("hello:" + first.hello().worker_id());
  ServerMessage hello_ack;
  hello_ack.mutable_hello_ack()->set_node_id("fake");
  hello_ack.mutable_hello_ack()->set_node_epoch("1");
  stream->write(hello_ack);
  cv_.notify_all();

  // Pings while the stream is open, checked every 50 ms (bounded by the
  // stream: joined right after the read loop ends).
  std::atomic<bool> reading{true};
  std::thread pinger([&] {
    TimePoint last = SystemClock::instance().now();
    while (reading.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Duration interval;
      {
        std::lock_guard<std::mutex> lock(mu_);
        interval = ping_interval_;
      }
      TimePoint now = SystemClock::instance().now();
      if (interval > Duration::zero() && now - last >= interval) {
        ServerMessage ping;
        ping.mutable_ping();
        stream->write(ping);
        last = now;
      }
    }
  });

  WorkerMessage message;
  while (rw->Read(&message)) {
    if (message.has_flow_result()) {
      AckMode mode;
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_.push_back({message.flow_result(), index});
        mode = ack_mode_;
      }
      cv_.notify_all();
      if (mode != AckMode::kNone) {
        ServerMessage ack;
        ack.mutable_result_ack()->set_task_id(message.flow_result().task_id());
        ack.mutable_result_ack()->set_accepted(mode == AckMode::kAccept);
        if (mode == AckMode::kRefuse) {
          ack.mutable_result_ack()->set_reason("stale: the attempt already ended");
        }
        stream->write(ack);
      }
    } else if (message.has_heartbeat()) {
      bool cancel;
      {
        std::lock_guard<std::mutex> lock(mu_);
        heartbeats_.push_back(message.heartbeat());
        cancel = cancel_on_heartbeat_;
      }
      cv_.notify_all();
      ServerMessage ack;
      ack.mutable_heartbeat_ack()->set_task_id(message.heartbeat().task_id());
      ack.mutable_heartbeat_ack()->set_cancel_requested(cancel);
      stream->write(ack);
    }
  }
  reading = false;
  pinger.join();
  {
    std::lock_guard<std::mutex> lock(stream->write_mu);
    stream->done = true;
  }
  return grpc::Status::OK;
}

bool FakeWorkerTaskService::wait_for_streams(size_t count, Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return hellos_.size() >= count; });
}

std::vector<WorkerHello> FakeWorkerTaskService::hellos() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hellos_;
}

std::shared_ptr<FakeWorkerTaskService::Stream> FakeWorkerTaskService::newest_open() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = streams_.rbegin(); it != streams_.rend(); ++it) {
    std::lock_guard<std::mutex> write_lock((*it)->write_mu);
    if (!(*it)->done) return *it;
  }
  return nullptr;
}

bool FakeWorkerTaskService::send_task(const flow::FlowTask& task) {
  auto stream = newest_open();
  if (!stream) return false;
  ServerMessage message;
  *message.mutable_flow_task() = task;
  return stream->write(message);
}

void FakeWorkerTaskService::drop_stream() {
  auto stream = newest_open();
  if (stream) stream->context->TryCancel();
}

std::optional<FakeWorkerTaskService::ReceivedResult> FakeWorkerTaskService::wait_for_result(
    const std::string& task_id, Duration timeout, size_t occurrence) {
  assert(occurrence >= 1);
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<ReceivedResult> found;
  cv_.wait_for(lock, timeout, [&] {
    size_t seen = 0;
    for (const auto& r : results_) {
      if (r.result.task_id() == task_id && ++seen == occurrence) {
        found = r;
        return true;
      }
    }
    return false;
  });
  return found;
}

size_t FakeWorkerTaskService::result_count(const std::string& task_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& r : results_) n += r.result.task_id() == task_id ? 1 : 0;
  return n;
}

size_t FakeWorkerTaskService::results_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return results_.size();
}

bool FakeWorkerTaskService::ack(const std::string& task_id, bool accepted,
                                const std::string& reason) {
  auto stream = newest_open();
  if (!stream) return false;
  ServerMessage message;
  message.mutable_result_ack()->set_task_id(task_id);
  message.mutable_result_ack()->set_accepted(accepted);
  message.mutable_result_ack()->set_reason(reason);
  return stream->write(message);
}

void FakeWorkerTaskService::set_ack_mode(AckMode mode) {
  std::lock_guard<std::mutex> lock(mu_);
  ack_mode_ = mode;
}

std::optional<TaskHeartbeat> FakeWorkerTaskService::wait_for_heartbeat(const std::string& task_id,
                                                                       Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<TaskHeartbeat> found;
  cv_.wait_for(lock, timeout, [&] {
    for (const auto& h : heartbeats_) {
      if (h.task_id() == task_id) {
        found = h;
        return true;
      }
    }
    return false;
  });
  return found;
}

void FakeWorkerTaskService::set_cancel_on_heartbeat(bool cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  cancel_on_heartbeat_ = cancel;
}

void FakeWorkerTaskService::set_ping_interval(Duration interval) {
  std::lock_guard<std::mutex> lock(mu_);
  ping_interval_ = interval;
}

// ------------------------------------------------------------ FakeFlowService

namespace {

flow::Payload json_text(const std::string& text) {
  flow::Payload p;
  p.set_data(text);
  return p;
}

// Waits up to `d`, or until the call is cancelled (its deadline passed).
void wait_unless_cancelled(grpc::ServerContext* context, std::chrono::milliseconds d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (!context->IsCancelled() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

flow::FlowDescription FakeFlowService::completed_run() {
  flow::FlowDescription run;
  run.set_flow_id("f-done");
  run.set_run_id("run-done");
  run.set_flow_type("Echo");
  run.set_declaration_version(1);
  run.set_status(flow::FLOW_COMPLETED);
  run.set_start_unix_ms(1'700'000'000'000);
  run.set_close_unix_ms(1'700'000'000'900);
  *run.mutable_input() = json_text(R"({"n":1})");
  flow::StepOutput* output = run.add_outputs();
  output->set_step_type("Echo");
  output->set_step_execution_id("Echo-1");
  *output->mutable_output() = json_text(R"({"n":1})");
  run.set_runs(1);
  return run;
}

grpc::Status FakeFlowService::StartFlow(grpc::ServerContext*, const flow::StartFlowRequest* request,
                                        flow::StartFlowResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  starts_.push_back(*request);
  if (request->flow_type() == "undeclared") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "Flow type 'undeclared' was never declared by a Worker");
  }
  response->set_run_id("run-" + std::to_string(starts_.size()));
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::StopFlow(grpc::ServerContext*, const flow::StopFlowRequest* request,
                                       flow::StopFlowResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  stops_.push_back(*request);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::PublishToChannel(grpc::ServerContext*,
                                               const flow::PublishToChannelRequest* request,
                                               flow::PublishToChannelResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  publishes_.push_back(*request);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::SkipTimer(grpc::ServerContext*, const flow::SkipTimerRequest* request,
                                        flow::SkipTimerResponse*) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  skips_.push_back(*request);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::TimeTravel(grpc::ServerContext*,
                                         const flow::TimeTravelRequest* request,
                                         flow::TimeTravelResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  travels_.push_back(*request);
  response->set_run_id("traveled-" + std::to_string(travels_.size()));
  if (request->dry_run())
    response->mutable_start()->mutable_flow()->set_traveled_from_run_id(request->flow().run_id());
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::UpdateFlowConfig(grpc::ServerContext*,
                                               const flow::UpdateFlowConfigRequest* request,
                                               flow::UpdateFlowConfigResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  config_updates_.push_back(*request);
  *response->mutable_config() = request->config();
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::DescribeFlow(grpc::ServerContext* context,
                                           const flow::FlowRef* request,
                                           flow::FlowDescription* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  if (request->flow_id() == "slow") wait_unless_cancelled(context, std::chrono::seconds(3));
  if (request->flow_id() != "f-done") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "no Flow with ID '" + request->flow_id() + "'");
  }
  *response = completed_run();
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::GetFlowState(grpc::ServerContext*, const flow::FlowRef* request,
                                           flow::GetFlowStateResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  state_requests_.push_back(*request);
  *response->mutable_flow() = completed_run();
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::GetHistoryEvents(grpc::ServerContext*,
                                               const flow::GetHistoryEventsRequest* request,
                                               flow::GetHistoryEventsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  history_requests_.push_back(*request);
  response->set_run_id("run-done");
  flow::HistoryEvent* started = response->add_events();
  started->set_seq(0);
  started->set_kind(flow::FLOW_STARTED);
  flow::HistoryEvent* closed = response->add_events();
  closed->set_seq(1);
  closed->set_kind(flow::FLOW_CLOSED);
  closed->set_status(flow::FLOW_COMPLETED);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::WaitForFlow(grpc::ServerContext* context,
                                          const flow::WaitForFlowRequest* request,
                                          flow::WaitForFlowResponse* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  if (request->flow().flow_id() == "f-done") {
    *response->mutable_flow() = completed_run();
    response->set_closed(true);
    return grpc::Status::OK;
  }
  wait_unless_cancelled(context,
                        std::chrono::milliseconds(std::min<int64_t>(request->timeout_ms(), 3000)));
  response->mutable_flow()->set_flow_id(request->flow().flow_id());
  response->mutable_flow()->set_flow_type("Echo");
  response->mutable_flow()->set_status(flow::FLOW_RUNNING);
  response->set_closed(false);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::GetAttributes(grpc::ServerContext*,
                                            const flow::GetAttributesRequest* request,
                                            flow::GetAttributesResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  attribute_gets_.push_back(*request);
  if (request->flow().flow_id() == "missing") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no Flow with ID 'missing'");
  }
  response->set_run_id("run-attrs");
  response->set_status(flow::FLOW_RUNNING);
  for (const auto& a : attributes_) {
    bool wanted =
        request->keys().empty() ||
        std::find(request->keys().begin(), request->keys().end(), a.key()) != request->keys().end();
    if (wanted) *response->add_attributes() = a;
  }
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::SetAttributes(grpc::ServerContext*,
                                            const flow::SetAttributesRequest* request,
                                            flow::SetAttributesResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  attribute_sets_.push_back(*request);
  if (request->flow().flow_id() == "f-done") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "run 'run-done' of Flow 'f-done' is not running (COMPLETED)");
  }
  for (const auto& w : request->writes()) {
    if (w.key() == "undeclared") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "Attribute 'undeclared' is not declared by Flow type 'Echo'");
    }
  }
  response->set_run_id("run-1");
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::WaitForAttribute(grpc::ServerContext* context,
                                               const flow::WaitForAttributeRequest* request,
                                               flow::WaitForAttributeResponse* response) {
  std::optional<flow::AttributeValue> current;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    attribute_waits_.push_back(*request);
    for (const auto& a : attributes_) {
      if (a.key() == request->key() && a.instance_key() == request->instance_key())
        current = a.value();
    }
  }
  if (request->flow().flow_id() == "f-done") {
    response->set_matched(false);
    response->set_status(flow::FLOW_COMPLETED);
    return grpc::Status::OK;
  }
  if (current && current->SerializeAsString() == request->value().SerializeAsString()) {
    response->set_matched(true);
    *response->mutable_current() = *current;
    response->set_status(flow::FLOW_RUNNING);
    return grpc::Status::OK;
  }
  wait_unless_cancelled(context,
                        std::chrono::milliseconds(std::min<int64_t>(request->timeout_ms(), 3000)));
  response->set_matched(false);
  if (current) *response->mutable_current() = *current;
  response->set_status(flow::FLOW_RUNNING);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::InvokeRpc(grpc::ServerContext* context,
                                        const flow::InvokeRpcRequest* request,
                                        flow::InvokeRpcResponse* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    rpcs_.push_back(*request);
  }
  const std::string& name = request->name();
  if (request->flow().flow_id() == "f-done") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "run 'run-done' of Flow 'f-done' is closed (COMPLETED)");
  }
  if (name == "undeclared") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "RPC 'undeclared' is not declared by Flow type 'Echo'");
  }
  if (name == "fail") {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "RPC 'fail' failed: the handler says no");
  }
  if (name == "slow") {
    wait_unless_cancelled(
        context, std::chrono::milliseconds(std::min<int64_t>(request->timeout_ms(), 3000)));
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "RPC 'slow' gave no result within its timeout");
  }
  if (name == "unavailable") {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the active process changed before RPC 'unavailable' was committed");
  }
  response->set_run_id("run-1");
  if (name == "text") {
    *response->mutable_output() = json_text(R"("just text")");
    return grpc::Status::OK;
  }
  const std::string& input = request->input().data();
  *response->mutable_output() =
      json_text(R"({"rpc":")" + name + R"(","input":)" + (input.empty() ? "null" : input) + "}");
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::SearchFlows(grpc::ServerContext*,
                                          const flow::SearchFlowsRequest* request,
                                          flow::SearchFlowsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  searches_.push_back(*request);
  if (request->query() == "unavailable")
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "this process is a standby");
  if (request->query().rfind("Nope", 0) == 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "query: at position 1: unknown field 'Nope' (system fields: FlowId, "
                        "RunId, FlowType, Status, StartTime, CloseTime, ExecutionDuration, "
                        "ParentFlowId, ActiveStepTypes)");
  if (request->page_size() < 0 || request->page_size() > 1000)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "page_size " + std::to_string(request->page_size()) +
                            ": a page has 1 to 1000 rows (0: 100)");
  size_t offset = 0;
  const std::string& token = request->page_token();
  if (!token.empty()) {
    if (token.rfind("at:", 0) != 0)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "page_token: not a page token of this query");
    offset = std::stoul(token.substr(3));
  }
  const size_t size = request->page_size() == 0 ? 100 : static_cast<size_t>(request->page_size());
  for (size_t i = offset; i < search_rows_.size() && i < offset + size; ++i)
    *response->add_rows() = search_rows_[i];
  if (offset + size < search_rows_.size())
    response->set_next_page_token("at:" + std::to_string(offset + size));
  response->set_applied_slot(42);
  return grpc::Status::OK;
}

std::vector<flow::SearchFlowsRequest> FakeFlowService::searches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return searches_;
}
void FakeFlowService::set_search_rows(std::vector<flow::FlowSearchRow> rows) {
  std::lock_guard<std::mutex> lock(mu_);
  search_rows_ = std::move(rows);
}

std::vector<flow::GetAttributesRequest> FakeFlowService::attribute_gets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attribute_gets_;
}
std::vector<flow::SetAttributesRequest> FakeFlowService::attribute_sets() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attribute_sets_;
}
std::vector<flow::WaitForAttributeRequest> FakeFlowService::attribute_waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attribute_waits_;
}
std::vector<flow::InvokeRpcRequest> FakeFlowService::rpcs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rpcs_;
}
void FakeFlowService::set_attributes_answer(std::vector<flow::Attribute> attributes) {
  std::lock_guard<std::mutex> lock(mu_);
  attributes_ = std::move(attributes);
}

std::vector<flow::StartFlowRequest> FakeFlowService::starts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return starts_;
}
std::vector<flow::StopFlowRequest> FakeFlowService::stops() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stops_;
}
std::vector<flow::PublishToChannelRequest> FakeFlowService::publishes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return publishes_;
}
std::vector<flow::SkipTimerRequest> FakeFlowService::skips() const {
  std::lock_guard<std::mutex> lock(mu_);
  return skips_;
}
std::vector<flow::UpdateFlowConfigRequest> FakeFlowService::config_updates() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_updates_;
}

std::vector<flow::TimeTravelRequest> FakeFlowService::travels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return travels_;
}
std::vector<flow::GetHistoryEventsRequest> FakeFlowService::history_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return history_requests_;
}
std::vector<flow::FlowRef> FakeFlowService::state_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_requests_;
}
size_t FakeFlowService::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

// ----------------------------------------------------------- FakeAdminService

grpc::Status FakeAdminService::Describe(grpc::ServerContext* context, const DescribeRequest*,
                                        DescribeResponse* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = context->client_metadata().find("authorization");
    last_authorization_ = it == context->client_metadata().end()
                              ? ""
                              : std::string(it->second.data(), it->second.size());
  }
  response->set_node_id("dev");
  response->set_node_epoch("18446744073709551615");  // above 2^53: must stay a string
  response->set_holder_process_id("host-42-abcdef01");
  return grpc::Status::OK;
}

std::string FakeAdminService::last_authorization() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_authorization_;
}

// ----------------------------------------------------------------- FakeServer

FakeServer::FakeServer(FakeWorkerTaskService& workers, FakeFlowService& flows,
                       FakeAdminService& admin, int port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterService(&workers);
  builder.RegisterService(&flows);
  builder.RegisterService(&admin);
  server_ = builder.BuildAndStart();
  assert(server_ != nullptr && port_ > 0 && "the fake server could not listen");
}

FakeServer::~FakeServer() { stop(); }

void FakeServer::stop() {
  if (!server_) return;
  server_->Shutdown(deadline_after(milliseconds(100)));
  server_->Wait();
  server_.reset();
}

}  // namespace dex::testing
