#include "fake_server.h"

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
    if (message.has_result()) {
      AckMode mode;
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_.push_back({message.result(), index});
        mode = ack_mode_;
      }
      cv_.notify_all();
      if (mode != AckMode::kNone) {
        ServerMessage ack;
        ack.mutable_result_ack()->set_task_id(message.result().task_id());
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

bool FakeWorkerTaskService::send_task(const StepTask& task) {
  auto stream = newest_open();
  if (!stream) return false;
  ServerMessage message;
  *message.mutable_task() = task;
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

Flow FakeFlowService::completed_flow() {
  Flow flow;
  flow.set_flow_id("f-done");
  flow.set_flow_type("three-step");
  flow.set_status(FLOW_STATUS_COMPLETED);
  flow.set_input(R"({"n":1})");
  flow.set_created_at_ms(1'700'000'000'000);
  flow.set_ended_at_ms(1'700'000'000'900);
  const char* names[] = {"fetch", "transform", "store"};
  const char* outputs[] = {R"({"fetched":1})", R"({"transformed":2})",
                           R"({"stored":true,"value":2})"};
  for (int i = 0; i < 3; ++i) {
    Step* step = flow.add_steps();
    step->set_name(names[i]);
    step->set_status(STEP_STATUS_COMPLETED);
    step->set_output(outputs[i]);
    if (i == 1) {
      Attempt* failed = step->add_attempts();
      failed->set_number(1);
      failed->set_outcome(ATTEMPT_OUTCOME_FAILED);
      failed->set_worker_id("w");
      failed->set_error("transient failure on the first attempt, as the example intends");
    }
    Attempt* ok = step->add_attempts();
    ok->set_number(i == 1 ? 2 : 1);
    ok->set_outcome(ATTEMPT_OUTCOME_COMPLETED);
    ok->set_worker_id("w");
  }
  return flow;
}

FlowType FakeFlowService::three_step_type() {
  FlowType type;
  type.set_name("three-step");
  StepDef* fetch = type.add_steps();
  fetch->set_name("fetch");
  fetch->set_task_queue("example");
  StepDef* transform = type.add_steps();
  transform->set_name("transform");
  transform->set_task_queue("example");
  transform->add_after("fetch");
  transform->mutable_retry()->set_max_attempts(3);
  transform->mutable_retry()->set_initial_interval_ms(200);
  transform->mutable_retry()->set_backoff_coefficient(2.0);
  transform->mutable_retry()->set_max_interval_ms(1000);
  transform->set_start_to_close_timeout_ms(10'000);
  transform->set_dispatch(DISPATCH_MODE_SYNC);
  return type;
}

grpc::Status FakeFlowService::RegisterFlowType(grpc::ServerContext*,
                                               const RegisterFlowTypeRequest* request,
                                               RegisterFlowTypeResponse* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    definitions_.push_back(request->definition());
  }
  if (on_event) on_event("register");
  if (request->definition().find("invalid") != std::string::npos) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "steps[0].taskQueue: 'invalid queue' is not a valid task queue name");
  }
  *response->mutable_flow_type() = three_step_type();
  response->set_changed(true);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::GetFlowType(grpc::ServerContext*, const GetFlowTypeRequest* request,
                                          FlowType* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  if (request->name() != "three-step") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no flow type named " + request->name());
  }
  *response = three_step_type();
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::ListFlowTypes(grpc::ServerContext*, const ListFlowTypesRequest*,
                                            ListFlowTypesResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  *response->add_flow_types() = three_step_type();
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::StartFlow(grpc::ServerContext*, const StartFlowRequest* request,
                                        StartFlowResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  starts_.push_back(*request);
  Flow* flow = response->mutable_flow();
  flow->set_flow_id(request->flow_id().empty() ? "generated-1" : request->flow_id());
  flow->set_flow_type(request->flow_type());
  flow->set_status(FLOW_STATUS_RUNNING);
  flow->set_input(request->input());
  response->set_already_existed(false);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::GetFlow(grpc::ServerContext* context, const GetFlowRequest* request,
                                      Flow* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  if (request->flow_id() == "slow") {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!context->IsCancelled() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (request->flow_id() != "f-done") {
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no flow with ID " + request->flow_id());
  }
  *response = completed_flow();
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::ListFlows(grpc::ServerContext*, const ListFlowsRequest* request,
                                        ListFlowsResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  lists_.push_back(*request);
  *response->add_flows() = completed_flow();
  if (request->page_token().empty()) response->set_next_page_token("page-2");
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::CancelFlow(grpc::ServerContext*, const CancelFlowRequest* request,
                                         CancelFlowResponse* response) {
  std::lock_guard<std::mutex> lock(mu_);
  ++calls_;
  Flow* flow = response->mutable_flow();
  flow->set_flow_id(request->flow_id());
  flow->set_flow_type("three-step");
  flow->set_status(FLOW_STATUS_CANCELLED);
  return grpc::Status::OK;
}

grpc::Status FakeFlowService::WaitFlow(grpc::ServerContext* context, const WaitFlowRequest* request,
                                       WaitFlowResponse* response) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
  }
  if (request->flow_id() == "f-done") {
    *response->mutable_flow() = completed_flow();
    response->set_ended(true);
    return grpc::Status::OK;
  }
  auto wait = std::chrono::milliseconds(std::min<int64_t>(request->timeout_ms(), 3000));
  auto until = std::chrono::steady_clock::now() + wait;
  while (!context->IsCancelled() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Flow* flow = response->mutable_flow();
  flow->set_flow_id(request->flow_id());
  flow->set_flow_type("three-step");
  flow->set_status(FLOW_STATUS_RUNNING);
  response->set_ended(false);
  return grpc::Status::OK;
}

std::vector<std::string> FakeFlowService::definitions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return definitions_;
}
std::vector<StartFlowRequest> FakeFlowService::starts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return starts_;
}
std::vector<ListFlowsRequest> FakeFlowService::lists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lists_;
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
