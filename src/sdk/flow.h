// The dex programming model in C++ (docs/flow-rules.md; examples/flows/):
// a Flow lists its Steps and its persistence schema (Channels); a Step has an
// optional wait_for, which returns a Wait over Timers, Channel conditions and
// SubFlows (sub_flow.h), and an execute, which returns a StepDecision. A dex::Worker hosts Flows
// (worker.h: Worker::host); a dex::Client starts and talks to their runs.
//
//   class Charge : public dex::Step {
//    public:
//     std::string type() const override { return "Charge"; }
//     dex::StepDecision execute(dex::Context& ctx) override {
//       return dex::StepDecision::go_to("Ship", ctx.input());
//     }
//   };
//   class Ship : public dex::WaitingStep {
//     dex::Wait wait_for(dex::Context&) override {
//       return dex::Wait::any_of({approval.for_one(), dex::Timer::after(hours(24))});
//     }
//     dex::StepDecision execute(dex::Context& ctx) override {
//       if (ctx.timer_fired()) return dex::StepDecision::go_to("Ship", ctx.input());
//       return dex::StepDecision::graceful_complete(ctx.messages(approval).at(0));
//     }
//   };
//
// A Flow may also declare Attributes (sdk/attribute.h: typed per-run values
// its Steps and RPCs read and write) and RPCs (Rpc: handlers a client calls
// synchronously with Client::invoke_rpc).
//
// Values (inputs, outputs, messages, locals, RPC inputs and outputs) are JSON:
// on the wire they are Payloads holding JSON text; a typed value goes through
// nlohmann::json's to_json/from_json. Handlers run on the Worker's pool
// threads; a Context is valid only during its call.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.h"
#include "dex/flow_api.pb.h"
#include "sdk/attribute.h"
#include "sdk/condition.h"
#include "sdk/start_options.h"
#include "sdk/sub_flow.h"

namespace dex {

using json = nlohmann::json;

// ---------------------------------------------------------------- conditions

struct Timer {
  // Fires `d` after the wait is recorded (durable on the server).
  static Condition after(std::chrono::milliseconds d);
  // Fires at a wall-clock time (Unix ms); a time already past fires at once.
  static Condition at_unix_ms(int64_t unix_ms);
};

// A durable FIFO queue of one run, declared in the Flow's schema.
class Channel {
 public:
  explicit Channel(std::string name, std::string instance_key = "")
      : name_(std::move(name)), instance_key_(std::move(instance_key)) {}
  const std::string& name() const { return name_; }
  const std::string& instance_key() const { return instance_key_; }
  Condition for_one() const;             // met at >= 1; takes 1
  Condition for_n(uint32_t n) const;     // met at >= n; takes n
  Condition at_least(uint32_t n) const;  // met at >= n; takes all queued
  Condition at_most(uint32_t n) const;   // met at once; takes up to n
  Condition at_least_at_most(uint32_t min, uint32_t max) const;

 private:
  Condition condition(flow::ChannelMatch match, uint32_t min, uint32_t max) const;
  std::string name_, instance_key_;
};

// One queue per runtime instance key.
class ChannelMap {
 public:
  explicit ChannelMap(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  Channel instance(std::string key) const { return Channel(name_, std::move(key)); }

 private:
  std::string name_;
};

class Wait {
 public:
  static Wait any_of(std::vector<Condition> conditions);
  static Wait all_of(std::vector<Condition> conditions);
  // An OR of AND groups of condition IDs; every condition needs an id().
  static Wait any_combination_of(std::vector<std::vector<std::string>> groups,
                                 std::vector<Condition> conditions);
  // No waiting: execute runs at once.
  static Wait skip();
  const flow::Wait& proto() const { return proto_; }

 private:
  flow::Wait proto_;
};

// ---------------------------------------------------------------- options

// RetryPolicy: sdk/start_options.h.

struct MethodOptions {
  std::chrono::milliseconds attempt_timeout{0};  // 0: 60 s
  RetryPolicy retry;
  // WaitFor: run execute anyway once retries end (it sees wait_for_failed()).
  bool proceed_to_execute_on_failure = false;
  // Execute: start this recovery Step (same input, the last error) once retries end.
  std::string recovery_step;
  bool async = false;  // ASYNC durability: sent while its start is written
  std::chrono::milliseconds heartbeat_timeout{0};
  // No attempt of this method is handed out while another attempt or RPC of
  // the same run holds one of these keys; waiters get them in queue order.
  std::vector<std::string> lock_keys;
};

struct StepOptions {
  MethodOptions wait_for;
  MethodOptions execute;
  flow::StepOptions proto() const;
};

// ---------------------------------------------------------------- decisions

struct Movement {
  std::string step_type;
  json input;
  std::optional<StepOptions> options;  // overrides the Step's own for this execution
};

class StepDecision {
 public:
  static StepDecision go_to(std::string step_type, json input = nullptr);
  static StepDecision go_to_multi(std::vector<Movement> movements);
  static StepDecision graceful_complete(json output = nullptr);
  static StepDecision force_complete(json output = nullptr);
  static StepDecision force_fail(std::string reason);
  static StepDecision dead_end();
  // Completes with `output` if every named Channel is empty (a ChannelMap:
  // every instance), else applies `otherwise` — one atomic check.
  static StepDecision force_complete_if_channels_empty(std::vector<Channel> channels,
                                                       std::vector<ChannelMap> maps, json output,
                                                       std::vector<Movement> otherwise);
  // Cancels other active Steps with the decision.
  StepDecision& cancel_steps(std::vector<std::string> step_types);
  StepDecision& cancel_siblings();
  // With go_to or dead_end: the run then continues as a new run of its Flow
  // ID (docs/flow-rules.md, "Continue-as-new") once no attempt of it runs;
  // the new run holds its Attributes, Channel messages, active Steps (same
  // execution IDs) and Timers, so a long loop keeps a bounded history.
  // Ignored when the decision closes the run.
  //   return dex::StepDecision::go_to("Poll", next).continue_as_new();
  StepDecision& continue_as_new();
  const flow::StepDecision& proto() const { return proto_; }

 private:
  flow::StepDecision proto_;
};

// ---------------------------------------------------------------- context

namespace sdk_internal {
// What a method may do with Attributes: the Flow's schema and the keys its
// task carries (its reads). `reader` names the method in messages.
struct AttributeScope {
  std::string flow_type;
  std::string reader;  // "Step 'Charge'", "RPC 'approve'"
  std::map<std::string, AttributeDef> schema;
  std::vector<std::string> reads;
};
}  // namespace sdk_internal

class Context {
 public:
  // `attributes` (may be null: no Attribute is declared) must outlive the Context.
  Context(const flow::FlowTask& task, json input, std::function<void()> heartbeat,
          std::function<bool()> cancelled,
          const sdk_internal::AttributeScope* attributes = nullptr);

  const std::string& flow_id() const { return task_.flow_id(); }
  const std::string& run_id() const { return task_.run_id(); }
  const std::string& flow_type() const { return task_.flow_type(); }
  // An RPC handler's Context has no Step: these are empty there.
  const std::string& step_type() const { return task_.step_type(); }
  const std::string& step_execution_id() const {
    return is_rpc() ? kNone : task_.step_execution_id();
  }
  // An RPC handler's: its name and the RPC ID; empty in a Step.
  bool is_rpc() const { return task_.method() == flow::RPC; }
  // The timeout handler's Context (Flow::on_timeout): step_type() is empty,
  // step_execution_id() "timeout".
  bool is_timeout_handler() const { return task_.method() == flow::ON_TIMEOUT; }
  const std::string& rpc_name() const { return task_.rpc_name(); }
  const std::string& rpc_id() const { return is_rpc() ? task_.step_execution_id() : kNone; }
  uint32_t attempt() const { return task_.attempt(); }
  // The run's Flow retry attempt (StartOptions::retry): 1, then 2 for the first retry's run, ...
  uint32_t flow_attempt() const { return std::max<uint32_t>(task_.flow_attempt(), 1); }
  int64_t first_attempt_unix_ms() const { return task_.first_attempt_unix_ms(); }
  // The execution whose decision started this one ("" for the start Step).
  const std::string& scheduled_by() const { return task_.scheduled_by(); }
  const json& input() const { return input_; }

  // Locals: what wait_for leaves for the same execution's execute.
  void set_local(const std::string& key, json value);
  json local(const std::string& key) const;

  // Execute: what met the wait.
  bool timer_fired() const;  // a Timer condition fired (or was skipped)
  bool fired(const std::string& condition_id) const;
  bool fired(uint32_t condition_index) const;
  // The messages the wait took from `channel` (all its conditions on it), in order.
  std::vector<json> messages(const Channel& channel) const;
  // A SubFlow condition's child (by the condition's index or ID) as the wait
  // was met: closed, or RUNNING when another condition won an any_of. Throws
  // FlowFailure (non-retryable) when that condition is not a SubFlow's.
  SubFlowResult sub_flow(uint32_t condition_index) const;
  SubFlowResult sub_flow(const std::string& condition_id) const;
  // Every SubFlow condition's child, in the wait's order.
  std::vector<SubFlowResult> sub_flows() const;
  bool wait_for_failed() const { return task_.wait_for_failed(); }
  // Why WaitFor failed (wait_for_failed) or why the Step this recovery Step
  // replaces failed; empty otherwise.
  const std::string& recovery_error() const { return task_.recovery_error(); }

  // Appended when the method's result is accepted, with it, in order.
  void publish(const Channel& channel, json message);
  // Channel sizes: the messages waiting in a Channel (or a ChannelMap
  // instance) as the task was handed out, plus those this method published.
  // A snapshot: messages may arrive, or other Steps' waits take them, since.
  // Throws FlowFailure (non-retryable) when the run had more than 10,000
  // non-empty queues and the answer is not among those the task carries.
  uint64_t channel_size(const Channel& channel) const;
  // A ChannelMap's instances holding messages: how many, and their keys in order.
  size_t channel_map_size(const ChannelMap& map) const;
  std::vector<std::string> channel_instance_keys(const ChannelMap& map) const;
  // Attributes: through Attribute<T>::get/set/remove and AttributeMap<T>'s
  // (sdk/attribute.h); their writes go with the result in the same way.

  void heartbeat() { heartbeat_(); }
  bool cancelled() const { return cancelled_(); }

  // Internal: what the result carries.
  const json& locals() const { return locals_; }
  const std::vector<flow::Publish>& publishes() const { return publishes_; }
  const std::vector<flow::Attribute>& attribute_writes() const { return attribute_writes_; }

 private:
  friend std::optional<flow::AttributeValue> sdk_internal::read_attribute(const Context&,
                                                                          const AttributeDef&,
                                                                          const std::string&);
  friend std::vector<std::string> sdk_internal::attribute_instances(const Context&,
                                                                    const AttributeDef&);
  friend void sdk_internal::write_attribute(Context&, const AttributeDef&, const std::string&,
                                            std::optional<flow::AttributeValue>);
  // Throws AttributeError unless `def` matches the schema (and, for a read, is read).
  void check_attribute(const AttributeDef& def, bool read) const;
  // The sizes of channel `name`'s queues by instance key ("" for a Channel),
  // own publishes included; throws FlowFailure when the task's list was cut.
  std::map<std::string, uint64_t> queue_sizes(const std::string& name) const;

  static const std::string kNone;
  const flow::FlowTask& task_;
  json input_;
  json locals_ = json::object();
  std::vector<flow::Publish> publishes_;
  const sdk_internal::AttributeScope* attributes_;
  // The current values: the task's, with this method's writes applied. By key,
  // then instance key ("" for a plain Attribute).
  std::map<std::string, std::map<std::string, flow::AttributeValue>> values_;
  std::vector<flow::Attribute> attribute_writes_;
  std::function<void()> heartbeat_;
  std::function<bool()> cancelled_;
};

// ---------------------------------------------------------------- Steps, Flows

class Step {
 public:
  virtual ~Step() = default;
  virtual std::string type() const = 0;
  virtual bool waits() const { return false; }
  virtual Wait wait_for(Context&) { return Wait::skip(); }
  virtual StepDecision execute(Context& context) = 0;
  virtual StepOptions options() const { return {}; }
  // The Attributes this Step's tasks carry (its reads): by default every one
  // the Flow declares. A get of any other fails naming it.
  virtual AttributeReads attribute_reads() const { return AttributeReads::all(); }
};

// A Step whose wait_for runs first.
class WaitingStep : public Step {
 public:
  bool waits() const final { return true; }
  Wait wait_for(Context& context) override = 0;
};

// ---------------------------------------------------------------- RPCs

// What an RPC handler returns: its output (JSON; a typed value converts with
// to_json) and the Steps it starts (scheduled by "rpc:<name>").
struct RpcResult {
  RpcResult(json out = nullptr, std::vector<Movement> steps = {})  // NOLINT: implicit
      : output(std::move(out)), next_steps(std::move(steps)) {}
  json output;
  std::vector<Movement> next_steps;
};

struct RpcOptions {
  // As MethodOptions::lock_keys: the handler runs only while it holds them.
  std::vector<std::string> lock_keys;
  AttributeReads attribute_reads;  // default: every declared Attribute
};

// An RPC handler: runs on a Worker's pool thread with the run's Attributes
// (its reads); its Attribute writes, Channel publishes (ctx.publish) and next
// Steps are committed with its output in one record. A throw (or a
// FlowFailure) fails the RPC: the client gets FAILED_PRECONDITION with the
// message. The server never retries an RPC.
using RpcHandler = std::function<RpcResult(Context&, const json& input)>;

class Rpc {
 public:
  Rpc(std::string name, RpcHandler handler, RpcOptions options = {})
      : name_(std::move(name)), handler_(std::move(handler)), options_(std::move(options)) {}

  // A handler of a typed input: `handler(Context&, const In&)` returns an
  // RpcResult, a json, a value with to_json, or nothing. An input that does
  // not convert to In fails the RPC naming it.
  template <typename In, typename Handler>
  static Rpc typed(std::string name, Handler handler, RpcOptions options = {}) {
    std::string rpc = name;
    return Rpc(
        std::move(name),
        [rpc, handler = std::move(handler)](Context& ctx, const json& input) -> RpcResult {
          auto call = [&](const In& in) -> RpcResult {
            using Out = std::invoke_result_t<Handler&, Context&, const In&>;
            if constexpr (std::is_void_v<Out>) {
              handler(ctx, in);
              return RpcResult();
            } else if constexpr (std::is_same_v<std::decay_t<Out>, RpcResult>) {
              return handler(ctx, in);
            } else {
              return RpcResult(json(handler(ctx, in)));
            }
          };
          if constexpr (std::is_same_v<In, json>) {
            return call(input);
          } else {
            std::optional<In> in;
            try {
              in.emplace(input.get<In>());
            } catch (const json::exception& e) {
              throw FlowFailure("the input of RPC '" + rpc + "' does not convert: " + e.what(),
                                true);
            }
            return call(*in);
          }
        },
        std::move(options));
  }

  const std::string& name() const { return name_; }
  const RpcOptions& options() const { return options_; }
  RpcResult call(Context& context, const json& input) const { return handler_(context, input); }

 private:
  std::string name_;
  RpcHandler handler_;
  RpcOptions options_;
};

class Flow {
 public:
  virtual ~Flow() = default;
  virtual std::string type() const = 0;
  // Every Step the Flow may reach; start_step() names the first ("": none).
  virtual std::vector<std::shared_ptr<Step>> steps() const = 0;
  virtual std::string start_step() const = 0;
  virtual std::vector<Channel> channels() const { return {}; }
  virtual std::vector<ChannelMap> channel_maps() const { return {}; }
  // The Attributes and AttributeMaps of the persistence schema:
  //   std::vector<dex::AttributeDef> attributes() const override { return {status, stock}; }
  virtual std::vector<AttributeDef> attributes() const { return {}; }
  virtual std::vector<Rpc> rpcs() const { return {}; }
  // The Attribute Store (the server's attributeStore.stores.<name>) its runs'
  // synced Attributes (dex::kSync) go to, unless a start names another
  // (StartOptions::attribute_store). "": none.
  //   std::string attribute_store() const override { return "orders"; }
  virtual std::string attribute_store() const { return {}; }
  // The Flow's FlowConfig for its runs (a start's StartOptions::config
  // overrides it field by field), e.g. continue-as-new once a run's history
  // holds this many events:
  //   flow::FlowConfig config() const override {
  //     flow::FlowConfig c;
  //     c.set_continue_as_new_after_events(500);
  //     return c;
  //   }
  virtual flow::FlowConfig config() const { return {}; }

  // The timeout handler, for runs started with timeout policy HANDLER
  // (StartOptions::timeout(d, flow::TIMEOUT_HANDLER)): when the run's timeout
  // passes, on_timeout runs once (its attempts retried by its options) beside
  // the Steps still running, with the run's input (ctx.input()) and the
  // Attributes it reads, and returns a StepDecision applied like an
  // Execute's: force_fail(reason) ends the run FAILED, cancel_siblings()
  // cancels every active Step, go_to starts Steps, dead_end leaves the run to
  // its Steps with no timeout. A handler that fails for good ends the run
  // TIMED_OUT. Override has_timeout_handler() to return true, and on_timeout.
  virtual bool has_timeout_handler() const { return false; }
  virtual StepDecision on_timeout(Context& context);
  // Its attempt timeout, retries, durability and heartbeat; lock keys and
  // failure policies (proceed_to_execute_on_failure, recovery_step) are refused.
  virtual MethodOptions timeout_handler_options() const { return {}; }
  // The Attributes its task carries: by default every one the Flow declares.
  virtual AttributeReads timeout_handler_reads() const { return AttributeReads::all(); }

  // What a Worker declares in its hello.
  flow::FlowDeclaration declaration() const;
  // InvalidArgument naming what is wrong: an Attribute key or RPC name empty
  // or repeated, two Attributes with one index key, more than 64 indexed
  // Attributes, a read of an undeclared Attribute, timeout handler options it
  // cannot take, an attribute_store() name the server would refuse (too long,
  // a control character). Worker::run() checks it.
  Status validate() const;
};

// Runs one FlowTask with `flow` (the Worker's pool threads call it): WaitFor,
// Execute, an RPC handler or the timeout handler (ON_TIMEOUT). Never throws.
flow::FlowTaskResult run_flow_task(Flow& flow, const flow::FlowTask& task,
                                   const std::function<void()>& heartbeat,
                                   const std::function<bool()>& cancelled);

}  // namespace dex
