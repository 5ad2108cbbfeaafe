// The Client and the Worker (hosting a small dex Flow) given several
// addresses, against real ApiServers over a real Engine (MemoryObjectStore +
// LogWriter) on 127.0.0.1: a server
// that is never set active answers UNAVAILABLE as a standby does; roles switch
// with set_inactive/set_active, the old active process going away as a real
// one does (its ApiServer shut down, a new inactive one started on its port).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>

#include "api/api_server.h"
#include "api_process.h"
#include "engine/engine.h"
#include "log/log.h"
#include "node_engine.h"
#include "objstore/memory_store.h"
#include "sdk/addresses.h"
#include "sdk/attribute.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;

constexpr Duration kWait = seconds(10);  // bound on every wait for something that should happen

// Flow type "Echo": one Execute-only Step that completes the run with its
// input, after `handled` is counted.
class Echo final : public Flow {
  class EchoStep final : public Step {
   public:
    explicit EchoStep(std::atomic<int>* handled) : handled_(handled) {}
    std::string type() const override { return "Echo"; }
    StepDecision execute(Context& ctx) override {
      if (handled_ != nullptr) ++*handled_;
      return StepDecision::graceful_complete(ctx.input());
    }

   private:
    std::atomic<int>* handled_;
  };

 public:
  explicit Echo(std::atomic<int>* handled = nullptr) : handled_(handled) {}
  std::string type() const override { return "Echo"; }
  std::string start_step() const override { return "Echo"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<EchoStep>(handled_)};
  }

 private:
  std::atomic<int>* handled_;
};

// Flow type "Marker": Gate waits for a message on "go", then writes "mark" =
// "step" and moves to Park, which waits for ever (the run stays RUNNING).
const Attribute<std::string> kMark{"mark"};
const Channel kGo{"go"};
const Channel kNever{"never"};

class Marker final : public Flow {
  class Gate final : public WaitingStep {
   public:
    std::string type() const override { return "Gate"; }
    Wait wait_for(Context&) override { return Wait::any_of({kGo.for_one()}); }
    StepDecision execute(Context& ctx) override {
      kMark.set(ctx, "step");
      return StepDecision::go_to("Park");
    }
  };
  class Park final : public WaitingStep {
   public:
    std::string type() const override { return "Park"; }
    Wait wait_for(Context&) override { return Wait::any_of({kNever.for_one()}); }
    StepDecision execute(Context&) override { return StepDecision::dead_end(); }
  };

 public:
  std::string type() const override { return "Marker"; }
  std::string start_step() const override { return "Gate"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<Gate>(), std::make_shared<Park>()};
  }
  std::vector<Channel> channels() const override { return {kGo, kNever}; }
  std::vector<AttributeDef> attributes() const override { return {kMark}; }
};

// What one process hands the ApiServer: the node's engine, seen through a
// switchboard that counts calls and can misbehave as a process does when its
// engine stops under a call.
class ProcessEngine final : public Engine {
 public:
  explicit ProcessEngine(Engine& inner) : inner_(inner) {}

  // complete_task keeps results back: no ack, as when the engine stops
  // before a result is durable (the Worker must re-send it elsewhere).
  std::atomic<bool> hold_results{false};
  // start_flow is done by the engine, then answered as if the engine had
  // stopped under it (UNAVAILABLE: the outcome is unknown to the caller).
  std::atomic<bool> stop_after_start{false};
  // set_attributes is done by the engine, then this runs (what happens while
  // the answer is lost), then the call is answered as if the engine had
  // stopped under it (UNAVAILABLE: the caller repeats it elsewhere).
  std::function<void()> after_set_landed;
  std::atomic<int> sets{0};
  // describe_flow takes this long (a process that is slow or frozen).
  std::atomic<int64_t> describe_delay_ms{0};

  std::atomic<int> results_held{0};
  std::atomic<int> results_forwarded{0};
  std::atomic<int> starts{0};
  std::atomic<int> describes{0};

  void stop() override {}
  std::string local_store_report() const override { return inner_.local_store_report(); }
  StatusOr<SnapshotInfo> snapshot_now() override { return inner_.snapshot_now(); }
  SnapshotStats snapshot_stats() const override { return inner_.snapshot_stats(); }

  StatusOr<flow::StartFlowResponse> start_flow(const flow::StartFlowRequest& r) override {
    ++starts;
    auto started = inner_.start_flow(r);
    if (stop_after_start && started.is_ok()) {
      return Status::stopped("the engine stopped (the lease was lost or released)");
    }
    return started;
  }
  StatusOr<flow::FlowDescription> describe_flow(const flow::FlowRef& r) override {
    ++describes;
    if (int64_t ms = describe_delay_ms.load(); ms > 0) {
      std::this_thread::sleep_for(milliseconds(ms));
    }
    return inner_.describe_flow(r);
  }
  Status stop_flow(const flow::StopFlowRequest& r) override { return inner_.stop_flow(r); }
  Status publish(const flow::PublishToChannelRequest& r) override { return inner_.publish(r); }
  Status skip_timer(const flow::SkipTimerRequest& r) override { return inner_.skip_timer(r); }
  StatusOr<flow::TimeTravelResponse> time_travel(const flow::TimeTravelRequest& r) override {
    return inner_.time_travel(r);
  }
  StatusOr<flow::TriggerContinueAsNewResponse> continue_as_new(
      const flow::TriggerContinueAsNewRequest& r) override {
    return inner_.continue_as_new(r);
  }
  StatusOr<flow::UpdateFlowConfigResponse> update_flow_config(
      const flow::UpdateFlowConfigRequest& r) override {
    return inner_.update_flow_config(r);
  }
  StatusOr<flow::GetFlowStateResponse> flow_state(const flow::FlowRef& r) override {
    return inner_.flow_state(r);
  }
  StatusOr<flow::GetHistoryEventsResponse> history(
      const flow::GetHistoryEventsRequest& r) override {
    return inner_.history(r);
  }
  StatusOr<flow::WaitForFlowResponse> wait_for_flow(
      const flow::WaitForFlowRequest& r, const std::function<bool()>& cancelled) override {
    return inner_.wait_for_flow(r, cancelled);
  }
  StatusOr<flow::GetHistoryEventsResponse> wait_for_history_event(
      const flow::WaitForHistoryEventRequest& r, const std::function<bool()>& cancelled) override {
    return inner_.wait_for_history_event(r, cancelled);
  }
  StatusOr<flow::WaitForStepCompletionResponse> wait_for_step(
      const flow::WaitForStepCompletionRequest& r,
      const std::function<bool()>& cancelled) override {
    return inner_.wait_for_step(r, cancelled);
  }
  StatusOr<flow::GetAttributesResponse> get_attributes(
      const flow::GetAttributesRequest& r) override {
    return inner_.get_attributes(r);
  }
  StatusOr<flow::SearchFlowsResponse> search_flows(const flow::SearchFlowsRequest& r) override {
    return inner_.search_flows(r);
  }
  StatusOr<flow::ListSearchKeysResponse> list_search_keys(
      const flow::ListSearchKeysRequest& r) override {
    return inner_.list_search_keys(r);
  }
  StatusOr<flow::ListSearchValuesResponse> list_search_values(
      const flow::ListSearchValuesRequest& r) override {
    return inner_.list_search_values(r);
  }
  StatusOr<flow::SetAttributesResponse> set_attributes(
      const flow::SetAttributesRequest& r) override {
    ++sets;
    auto set = inner_.set_attributes(r);
    if (after_set_landed && set.is_ok()) {
      after_set_landed();
      return Status::stopped("the engine stopped (the lease was lost or released)");
    }
    return set;
  }
  StatusOr<flow::WaitForAttributeResponse> wait_for_attribute(
      const flow::WaitForAttributeRequest& r, const std::function<bool()>& cancelled) override {
    return inner_.wait_for_attribute(r, cancelled);
  }
  StatusOr<flow::InvokeRpcResponse> invoke_rpc(const flow::InvokeRpcRequest& r,
                                               const std::function<bool()>& cancelled) override {
    return inner_.invoke_rpc(r, cancelled);
  }
  StatusOr<WorkerHandle> connect_worker(const WorkerHello& hello,
                                        std::shared_ptr<WorkerSink> sink) override {
    return inner_.connect_worker(hello, std::move(sink));
  }
  void disconnect_worker(WorkerHandle worker) override { inner_.disconnect_worker(worker); }
  HeartbeatAck heartbeat(WorkerHandle worker, const TaskHeartbeat& heartbeat) override {
    return inner_.heartbeat(worker, heartbeat);
  }
  std::future<ResultAck> complete_task(WorkerHandle worker,
                                       const flow::FlowTaskResult& result) override {
    if (hold_results) {
      ++results_held;
      std::promise<ResultAck> never;
      never.set_exception(
          std::make_exception_ptr(EngineStoppedError("the engine stopped before the result")));
      return never.get_future();
    }
    ++results_forwarded;
    return inner_.complete_task(worker, result);
  }

 private:
  Engine& inner_;
};

std::unique_ptr<ApiProcess> start_api(int port = 0) {
  ApiServerOptions options;
  options.listen = "127.0.0.1:" + std::to_string(port);
  // A port just released may take a moment to bind again.
  for (int i = 0; i < 50; ++i) {
    auto server = ApiProcess::start(options);
    if (server.is_ok()) return std::move(server).value();
    std::this_thread::sleep_for(milliseconds(100));
  }
  ADD_FAILURE() << "cannot listen on " << options.listen;
  return nullptr;
}

std::string address_of(const ApiProcess& api) { return "127.0.0.1:" + std::to_string(api.port()); }

// An address where nothing listens: a port that was just free.
std::string dead_address() {
  auto api = start_api();
  std::string address = address_of(*api);
  api->shutdown(seconds(0));
  return address;
}

bool eventually(const std::function<bool()>& done, Duration timeout = kWait) {
  auto until = SystemClock::instance().now() + timeout;
  while (SystemClock::instance().now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return done();
}

class MultiAddressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    standby_ = start_api();
    active_ = start_api();
    ASSERT_TRUE(standby_ && active_);
    active_->set_active(&on_active_, {"n1", Epoch(1), "p1"});
  }
  void TearDown() override {
    stop_worker();
    for (auto* api : {&standby_, &active_}) {
      if (*api) (*api)->shutdown(seconds(0));
    }
  }

  ClientOptions client_options(std::vector<std::string> addresses) {
    ClientOptions options;
    options.server_addresses = std::move(addresses);
    options.timeout = seconds(5);
    return options;
  }
  // A Worker hosting Echo, running on its own thread.
  Worker& start_worker(std::vector<std::string> addresses, std::atomic<int>* handled = nullptr) {
    WorkerOptions options;
    options.server_addresses = std::move(addresses);
    options.worker_id = "w-multi";
    options.max_concurrent_tasks = 2;
    options.reconnect_backoff_initial = milliseconds(20);
    options.reconnect_backoff_max = milliseconds(200);
    options.shutdown_timeout = seconds(3);
    worker_ = std::make_unique<Worker>(options);
    worker_->host(std::make_shared<Echo>(handled));
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
    return *worker_;
  }
  void stop_worker() {
    if (!worker_) return;
    worker_->shutdown();
    ASSERT_EQ(run_.wait_for(kWait), std::future_status::ready) << "run() did not return";
    EXPECT_TRUE(run_.get().is_ok());
    worker_.reset();
  }
  // A Worker's hello declares Echo (durably, before it is accepted); then it
  // goes, so that runs started afterwards wait for a Worker.
  void declare_echo() {
    Worker& worker = start_worker({address_of(*active_)});
    ASSERT_TRUE(eventually([&] { return worker.stats().streams_accepted == 1; }));
    stop_worker();
  }
  std::optional<flow::FlowDescription> wait_closed(Client& client, const std::string& flow_id) {
    auto waited = client.wait_for_flow(flow_id, kWait);
    if (!waited.is_ok()) {
      ADD_FAILURE() << waited.status().message();
      return std::nullopt;
    }
    EXPECT_TRUE(waited->closed());
    return waited->flow();
  }

  NodeEngine node_;
  ProcessEngine on_active_{node_.engine()};
  ProcessEngine on_standby_{node_.engine()};
  std::unique_ptr<ApiProcess> standby_;  // never active unless a test switches roles
  std::unique_ptr<ApiProcess> active_;
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
};

TEST_F(MultiAddressTest, ClientFindsTheActiveProcessWhicheverOrderTheAddressesAreGiven) {
  declare_echo();
  int round = 0;
  for (auto addresses : {std::vector<std::string>{address_of(*standby_), address_of(*active_)},
                         std::vector<std::string>{address_of(*active_), address_of(*standby_)}}) {
    Client client(client_options(addresses));
    const std::string flow_id = "f-" + std::to_string(round++);
    auto started = client.start("Echo", flow_id, json{{"n", 1}});
    ASSERT_TRUE(started.is_ok()) << started.status().message();
    EXPECT_EQ(client.preferred_address(), address_of(*active_));
    EXPECT_FALSE(started->run_id().empty());
    EXPECT_FALSE(started->already_started());
    auto run = client.describe_flow(flow_id);
    ASSERT_TRUE(run.is_ok()) << run.status().message();
    EXPECT_EQ(run->status(), flow::FLOW_RUNNING);  // no Worker: its task waits
    EXPECT_EQ(run->run_id(), started->run_id());
    auto described = client.describe();
    ASSERT_TRUE(described.is_ok()) << described.status().message();
    EXPECT_EQ(described->node_id(), "n1");
  }
  // Errors other than UNAVAILABLE come back as they are, from the active process.
  Client client(client_options({address_of(*standby_), address_of(*active_)}));
  auto missing = client.describe_flow("nope");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_TRUE(missing.status().is_not_found()) << missing.status().message();
}

TEST_F(MultiAddressTest, WorkerFindsTheActiveProcessWhicheverOrderTheAddressesAreGiven) {
  Client client(client_options({address_of(*active_)}));
  int round = 0;
  for (auto addresses : {std::vector<std::string>{address_of(*standby_), address_of(*active_)},
                         std::vector<std::string>{address_of(*active_), address_of(*standby_)}}) {
    Worker& worker = start_worker(addresses);
    // Echo is declared once the Worker's stream is accepted.
    ASSERT_TRUE(eventually([&] { return worker.stats().streams_accepted == 1; }));
    const std::string flow_id = "f-" + std::to_string(round);
    auto started = client.start("Echo", flow_id, json{{"round", round}});
    ASSERT_TRUE(started.is_ok()) << started.status().message();
    auto run = wait_closed(client, flow_id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->status(), flow::FLOW_COMPLETED);
    ASSERT_EQ(run->outputs_size(), 1);
    EXPECT_EQ(from_payload(run->outputs(0).output()), (json{{"round", round}}));
    WorkerStats stats = worker.stats();
    EXPECT_EQ(stats.connected_address, address_of(*active_));
    EXPECT_EQ(stats.streams_accepted, 1u);
    // Whichever comes first, the readiness probe sends the stream straight to
    // the active process: the standby costs no stream.
    EXPECT_EQ(stats.streams_refused, 0u);
    EXPECT_EQ(stats.results_resent, 0u);
    stop_worker();
    ++round;
  }
}

TEST_F(MultiAddressTest, RolesSwitchAndTheWorkerDeliversItsUnacknowledgedResultOnce) {
  // The active process takes the result but stops before it is durable: no ack.
  on_active_.hold_results = true;
  const std::string old_active = address_of(*active_);
  const std::string new_active = address_of(*standby_);
  std::vector<std::string> addresses = {old_active, new_active};
  Client client(client_options(addresses));
  std::atomic<int> handled{0};
  Worker& worker = start_worker(addresses, &handled);
  ASSERT_TRUE(eventually([&] { return worker.stats().streams_accepted == 1; }));
  ASSERT_TRUE(client.start("Echo", "f-switch", json{{"x", 1}}).is_ok());
  ASSERT_TRUE(eventually([&] { return on_active_.results_held.load() == 1; }));
  EXPECT_EQ(worker.stats().connected_address, old_active);

  // The switch: the old active process steps down and goes away (a standby
  // takes its place on its port), the standby becomes the active one.
  auto switched_at = SystemClock::instance().now();
  active_->set_inactive("this process stepped down");
  standby_->set_active(&on_standby_, {"n1", Epoch(2), "p2"});
  int old_port = active_->port();
  active_->shutdown(seconds(0));
  active_ = start_api(old_port);
  ASSERT_TRUE(active_);

  ASSERT_TRUE(eventually([&] { return worker.stats().connected_address == new_active; }))
      << "the worker did not move to " << new_active;
  auto moved_after = SystemClock::instance().now() - switched_at;
  auto run = wait_closed(client, "f-switch");
  ASSERT_TRUE(run);
  EXPECT_EQ(client.preferred_address(), new_active);
  EXPECT_EQ(run->status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(run->outputs_size(), 1);
  EXPECT_EQ(from_payload(run->outputs(0).output()), (json{{"x", 1}}));
  EXPECT_EQ(handled.load(), 1);
  // One Execute result, of the first attempt: the re-sent result was applied
  // once, and no attempt failed or ran again.
  auto history = client.history("f-switch", 0, /*from_start=*/true);
  ASSERT_TRUE(history.is_ok()) << history.status().message();
  int executed = 0;
  for (const auto& event : history->events()) {
    EXPECT_NE(event.kind(), flow::EXECUTE_FAILED) << event.DebugString();
    if (event.kind() != flow::EXECUTE_COMPLETED) continue;
    ++executed;
    EXPECT_EQ(event.attempt(), 1u);
  }
  EXPECT_EQ(executed, 1) << "the result was delivered more than once";

  ASSERT_TRUE(eventually([&] { return worker.stats().results_accepted == 1; }));
  WorkerStats stats = worker.stats();
  EXPECT_EQ(stats.results_resent, 1u);
  EXPECT_EQ(stats.results_refused, 0u);
  EXPECT_EQ(on_standby_.results_forwarded.load(), 1);
  std::printf("[ figure ] the worker moved to the new active process %lld ms after the switch\n",
              static_cast<long long>(to_ms(moved_after)));

  // And back again: the client follows, starting at the address that answered last.
  standby_->set_inactive("this process stepped down");
  active_->set_active(&on_active_, {"n1", Epoch(3), "p3"});
  on_active_.hold_results = false;
  auto described = client.describe_flow("f-switch");
  ASSERT_TRUE(described.is_ok()) << described.status().message();
  EXPECT_EQ(described->status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(client.preferred_address(), old_active);
}

TEST_F(MultiAddressTest, StartFlowThatReachedAnEngineWhichThenStoppedIsNotDoneTwice) {
  declare_echo();
  // Both processes serve the node's engine; the first one starts the flow and
  // then answers UNAVAILABLE, as an engine that stopped under the call does.
  standby_->set_active(&on_standby_, {"n1", Epoch(1), "p1"});
  on_active_.stop_after_start = true;
  Client client(client_options({address_of(*active_), address_of(*standby_)}));
  auto started = client.start("Echo", "f-once", json::object());
  ASSERT_TRUE(started.is_ok()) << started.status().message();
  // The repeat carried the first attempt's request ID: it answers that run.
  EXPECT_TRUE(started->already_started());
  EXPECT_EQ(on_active_.starts.load(), 1);
  EXPECT_EQ(on_standby_.starts.load(), 1);
  auto run = client.describe_flow("f-once");
  ASSERT_TRUE(run.is_ok()) << run.status().message();
  EXPECT_EQ(run->runs(), 1u) << "the flow was started twice";
  EXPECT_EQ(run->run_id(), started->run_id());
}

// Start and wait in one call, the start landing and then its process
// answering UNAVAILABLE: the client sends the same start (same request ID,
// ignore_already_started) to the next process, which answers the run the
// first try started and waits for it to close, in that one call.
TEST_F(MultiAddressTest, AStartAndWaitWhoseEngineStoppedIsRepeatedOnceAndWaitsForTheSameRun) {
  standby_->set_active(&on_standby_, {"n1", Epoch(1), "p1"});
  on_active_.stop_after_start = true;
  std::atomic<int> handled{0};
  Worker& worker = start_worker({address_of(*active_)}, &handled);
  ASSERT_TRUE(eventually([&] { return worker.stats().streams_accepted == 1; }));
  Client client(client_options({address_of(*active_), address_of(*standby_)}));
  auto done = client.start_and_wait("Echo", "f-once-wait", json{{"w", 1}}, kWait);
  ASSERT_TRUE(done.is_ok()) << done.status().message();
  EXPECT_TRUE(done->already_started()) << "the repeat did not carry the first request ID";
  EXPECT_EQ(on_active_.starts.load(), 1);
  EXPECT_EQ(on_standby_.starts.load(), 1);
  ASSERT_TRUE(done->closed());
  EXPECT_EQ(done->flow().run_id(), done->run_id());
  EXPECT_EQ(done->flow().status(), flow::FLOW_COMPLETED);
  EXPECT_EQ(done->flow().runs(), 1u) << "the flow was started twice";
  ASSERT_EQ(done->flow().outputs_size(), 1);
  EXPECT_EQ(from_payload(done->flow().outputs(0).output()), (json{{"w", 1}}));
  EXPECT_EQ(handled.load(), 1);
}

// The lost update the request ID prevents: a SetAttributes lands, its answer
// is lost, a Step writes the same Attribute, and the client repeats the call
// on the next address. The repeat must change nothing: the Step's value stays
// (without a request ID it put "client" back over "step").
TEST_F(MultiAddressTest, ARepeatedSetAttributesDoesNotUndoAStepsLaterWrite) {
  standby_->set_active(&on_standby_, {"n1", Epoch(1), "p1"});
  WorkerOptions wo;
  wo.server_addresses = {address_of(*active_)};
  wo.worker_id = "w-marker";
  wo.shutdown_timeout = seconds(3);
  worker_ = std::make_unique<Worker>(wo);
  worker_->host(std::make_shared<Marker>());
  run_ = std::async(std::launch::async, [this] { return worker_->run(); });
  ASSERT_TRUE(eventually([&] { return worker_->stats().streams_accepted == 1; }));

  Client client(client_options({address_of(*active_), address_of(*standby_)}));
  ASSERT_TRUE(client.start("Marker", "f-mark", json::object()).is_ok());
  auto mark = [&]() -> std::optional<std::string> {
    auto got = client.get_attributes("f-mark");
    if (!got.is_ok()) return std::nullopt;
    return kMark.get(*got);
  };
  on_active_.after_set_landed = [&] {
    EXPECT_EQ(mark(), "client") << "the first call landed";
    flow::PublishToChannelRequest go;
    go.set_flow_id("f-mark");
    go.set_channel("go");
    go.add_messages()->set_data("{}");
    ASSERT_TRUE(node_.engine().publish(go).is_ok());
    EXPECT_TRUE(eventually([&] { return mark() == "step"; })) << "Gate never wrote its value";
  };
  Status set = client.set_attributes("f-mark", {kMark.write("client")});
  ASSERT_TRUE(set.is_ok()) << set.message();
  EXPECT_EQ(on_active_.sets.load(), 1);
  EXPECT_EQ(on_standby_.sets.load(), 1) << "the call was not repeated on the next address";
  EXPECT_EQ(mark(), "step") << "the repeated SetAttributes undid the Step's later write";
  auto history = client.history("f-mark", 0, true);
  ASSERT_TRUE(history.is_ok()) << history.status().message();
  int sets_applied = 0;
  for (const auto& e : history->events()) sets_applied += e.kind() == flow::ATTRIBUTES_SET;
  EXPECT_EQ(sets_applied, 1) << "the repeat was applied again";
}

TEST_F(MultiAddressTest, DeadlineExceededIsNotTriedOnAnotherAddress) {
  standby_->set_active(&on_standby_, {"n1", Epoch(1), "p1"});
  on_active_.describe_delay_ms = 1000;
  ClientOptions options = client_options({address_of(*active_), address_of(*standby_)});
  options.timeout = milliseconds(300);
  Client client(options);
  auto run = client.describe_flow("f-1");
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().message().rfind(
                "DEADLINE_EXCEEDED: no answer from " + address_of(*active_) + " within 300ms", 0),
            0u)
      << run.status().message();
  EXPECT_EQ(on_standby_.describes.load(), 0);
}

// A process replacing its listener (a role change) ends the calls still open
// on it (UNAVAILABLE or CANCELLED, depending on how far the call got; the
// client never cancels its own): the client sends the call, safe to repeat,
// to the next address.
TEST_F(MultiAddressTest, ACallEndedByTheServerShuttingDownMovesOnToTheNextAddress) {
  standby_->set_active(&on_standby_, {"n1", Epoch(1), "p1"});
  on_active_.describe_delay_ms = 1500;
  Client client(client_options({address_of(*active_), address_of(*standby_)}));
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(300));
    active_->shutdown(seconds(0));
  });
  auto run = client.describe_flow("f-1");
  closer.join();
  // The flow does not exist: NOT_FOUND is the second process's answer.
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().message().rfind("NOT_FOUND", 0), 0u) << run.status().message();
  EXPECT_EQ(on_active_.describes.load(), 1);
  EXPECT_EQ(on_standby_.describes.load(), 1);
}

// A single replica stepping down refuses its Workers for its hold-off (5 s)
// and then serves again. The Worker's backoff grows between refusals by an
// absent server, but a standby's answer keeps the wait at 500 ms at most, so
// the Worker is back within a second of the node serving (it was 3-6 s with
// the backoff alone after 6 s of refusals).
TEST_F(MultiAddressTest, AWorkerRefusedByAStandbyPollsItOftenAndIsBackSoonAfterItServes) {
  WorkerOptions options;
  options.server_addresses = {address_of(*standby_)};
  options.worker_id = "w-standby";
  options.reconnect_backoff_initial = milliseconds(100);
  options.reconnect_backoff_max = seconds(10);
  options.shutdown_timeout = seconds(3);
  worker_ = std::make_unique<Worker>(options);
  worker_->host(std::make_shared<Echo>());
  run_ = std::async(std::launch::async, [this] { return worker_->run(); });
  std::this_thread::sleep_for(seconds(6));
  const uint64_t refused = worker_->stats().streams_refused;
  EXPECT_GE(refused, 10u);  // every <= 500 ms, not 100, 200, 400 ... ms
  const auto serving = SystemClock::instance().now();
  standby_->set_active(&on_standby_, {"n1", Epoch(2), "p1"});
  ASSERT_TRUE(eventually([&] { return worker_->stats().streams_accepted == 1; }));
  EXPECT_LT(SystemClock::instance().now() - serving, milliseconds(1500));
}

// A Flow whose start Step is not one of its Steps: the server refuses the
// declaration, and retrying cannot help.
class NoStartStep final : public Flow {
 public:
  std::string type() const override { return "Broken"; }
  std::string start_step() const override { return "Missing"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return Echo().steps(); }
};

TEST_F(MultiAddressTest, AWorkerWhoseDeclarationTheServerRefusesStopsWithTheReason) {
  WorkerOptions options;
  options.server_addresses = {address_of(*standby_), address_of(*active_)};
  options.worker_id = "w-broken";
  options.reconnect_backoff_initial = milliseconds(20);
  options.reconnect_backoff_max = milliseconds(200);
  Worker worker(options);
  worker.host(std::make_shared<NoStartStep>());
  auto ran = std::async(std::launch::async, [&] { return worker.run(); });
  ASSERT_EQ(ran.wait_for(kWait), std::future_status::ready) << "run() kept retrying";
  Status status = ran.get();
  EXPECT_EQ(status.code(), Code::kInvalidArgument);
  EXPECT_NE(status.message().find(address_of(*active_) + " refused this Worker"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("Missing"), std::string::npos) << status.message();
  // Nothing of it was recorded: a start of the type is refused naming it.
  Client client(client_options({address_of(*active_)}));
  auto started = client.start("Broken", "f-broken", json::object());
  ASSERT_FALSE(started.is_ok());
  EXPECT_EQ(started.status().code(), Code::kInvalidArgument) << started.status().message();
}

TEST_F(MultiAddressTest, NobodyActiveFailsWithinTheDeadlineNamingEachAddress) {
  auto second_standby = start_api();
  ASSERT_TRUE(second_standby);
  const std::string a = address_of(*standby_), b = address_of(*second_standby);
  ClientOptions options = client_options({a, b});
  options.timeout = seconds(1);
  Client client(options);
  auto begin = SystemClock::instance().now();
  auto run = client.describe_flow("f-1");
  auto took = SystemClock::instance().now() - begin;
  ASSERT_FALSE(run.is_ok());
  EXPECT_TRUE(run.status().is_transient());
  const std::string& message = run.status().message();
  EXPECT_EQ(message.rfind("UNAVAILABLE: no active dex process at any of 2 addresses (kept trying "
                          "for 1s)",
                          0),
            0u)
      << message;
  for (const std::string& address : {a, b}) {
    EXPECT_NE(message.find("the server at " + address +
                           " is not serving: this process is "
                           "starting up"),
              std::string::npos)
        << message;
  }
  EXPECT_GE(took, seconds(1));
  EXPECT_LT(took, milliseconds(1500));

  // Nothing listening anywhere: no process could become active, the call fails at once.
  const std::string dead1 = dead_address(), dead2 = dead_address();
  options = client_options({dead1, dead2});
  options.timeout = seconds(10);
  Client nobody(options);
  begin = SystemClock::instance().now();
  run = nobody.describe_flow("f-1");
  took = SystemClock::instance().now() - begin;
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(
      run.status().message().rfind(
          "UNAVAILABLE: no active dex process at any of 2 addresses (none could be reached)", 0),
      0u)
      << run.status().message();
  for (const std::string& address : {dead1, dead2}) {
    EXPECT_NE(run.status().message().find("the server is not reachable at " + address),
              std::string::npos)
        << run.status().message();
  }
  EXPECT_LT(took, seconds(3));

  // A Worker keeps looking (it has no deadline) and stops promptly when asked.
  Worker& worker = start_worker({a, b});
  ASSERT_TRUE(eventually([&] { return worker.stats().streams_refused >= 4; }));
  EXPECT_EQ(worker.stats().streams_accepted, 0u);
  EXPECT_TRUE(worker.stats().connected_address.empty());
  auto stopping = SystemClock::instance().now();
  stop_worker();
  EXPECT_LT(SystemClock::instance().now() - stopping, seconds(2));
  second_standby->shutdown(seconds(0));
}

TEST(ServerAddresses, BadListsAreRefusedNamingTheBadEntry) {
  struct Case {
    std::string list;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"", "empty server address at position 1 of ''"},
           {"a:1,,b:2", "empty server address at position 2 of 'a:1,,b:2'"},
           {"a:1,", "empty server address at position 2 of 'a:1,'"},
           {"a:1,b", "invalid server address 'b': use host:port"},
           {"a:1,b:0", "invalid server address 'b:0': the port must be a number from 1 to 65535"},
           {"a:99999", "invalid server address 'a:99999': the port must be"},
           {"a:x", "invalid server address 'a:x': the port must be"},
           {":8801", "invalid server address ':8801': the host is missing"},
           {"a b:1", "invalid server address 'a b:1': the host may hold only"},
           {"::1:8801", "invalid server address '::1:8801': put an IPv6 address in brackets"},
           {"[::1:8801", "invalid server address '[::1:8801': use [IPv6 address]:port"},
           {"a:1, a:1", "server address 'a:1' is listed twice"},
       }) {
    auto parsed = parse_server_addresses(c.list);
    ASSERT_FALSE(parsed.is_ok()) << c.list;
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument) << c.list;
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << c.list << ": " << parsed.status().message();
  }
  auto good = parse_server_addresses(" 10.0.0.1:8801 , dex-1.dex.svc:8801,[::1]:9000");
  ASSERT_TRUE(good.is_ok()) << good.status().message();
  EXPECT_EQ(good.value(),
            (std::vector<std::string>{"10.0.0.1:8801", "dex-1.dex.svc:8801", "[::1]:9000"}));

  // The Client refuses every call, and the Worker its run(), naming the entry.
  ClientOptions client_options;
  client_options.server_addresses = {"127.0.0.1:8801", "127.0.0.1"};
  Client client(client_options);
  auto run = client.describe_flow("f");
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().code(), Code::kInvalidArgument);
  EXPECT_NE(run.status().message().find("invalid server address '127.0.0.1'"), std::string::npos)
      << run.status().message();
  WorkerOptions worker_options;
  worker_options.server_addresses = {"127.0.0.1:8801", "127.0.0.1:8801"};
  Worker worker(worker_options);
  worker.host(std::make_shared<Echo>());
  Status ran = worker.run();
  EXPECT_EQ(ran.code(), Code::kInvalidArgument);
  EXPECT_NE(ran.message().find("'127.0.0.1:8801' is listed twice"), std::string::npos)
      << ran.message();
  // The single-address convenience still works and is checked the same way.
  ClientOptions single;
  single.server_address = "localhost";
  EXPECT_EQ(Client(single).describe_flow("f").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace dex
