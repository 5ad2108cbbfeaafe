#include "sdk/flow.h"

#include <algorithm>
#include <map>
#include <set>

namespace dex {

namespace {
// Indexed Attributes per Flow type: the server's limit (docs/search.md).
constexpr size_t kIndexedAttributesMax = 64;
// Names are at most this long (the server's limit for every name).
constexpr size_t kNameBytesMax = 255;
}  // namespace

flow::Payload to_payload(const json& value) {
  flow::Payload p;
  if (!value.is_null()) p.set_data(value.dump());
  return p;
}

json from_payload(const flow::Payload& payload) {
  if (payload.data().empty()) return nullptr;
  return json::parse(payload.data());  // throws: the caller turns it into a failure
}

// ---------------------------------------------------------------- conditions

Condition Condition::id(std::string condition_id) const {
  flow::Condition p = proto_;
  p.set_condition_id(std::move(condition_id));
  return Condition(std::move(p));
}

Condition Timer::after(std::chrono::milliseconds d) {
  flow::Condition c;
  c.mutable_timer()->set_duration_ms(d.count());
  return Condition(std::move(c));
}

Condition Timer::at_unix_ms(int64_t unix_ms) {
  flow::Condition c;
  c.mutable_timer()->set_at_unix_ms(unix_ms);
  return Condition(std::move(c));
}

Condition Channel::condition(flow::ChannelMatch match, uint32_t min, uint32_t max) const {
  flow::Condition c;
  auto* ch = c.mutable_channel();
  ch->set_channel(name_);
  ch->set_instance_key(instance_key_);
  ch->set_match(match);
  ch->set_min(min);
  ch->set_max(max);
  return Condition(std::move(c));
}
Condition Channel::for_one() const { return condition(flow::FOR_ONE, 0, 0); }
Condition Channel::for_n(uint32_t n) const { return condition(flow::FOR_N, n, 0); }
Condition Channel::at_least(uint32_t n) const { return condition(flow::AT_LEAST, n, 0); }
Condition Channel::at_most(uint32_t n) const { return condition(flow::AT_MOST, 0, n); }
Condition Channel::at_least_at_most(uint32_t min, uint32_t max) const {
  return condition(flow::AT_LEAST_AT_MOST, min, max);
}

namespace {
Wait make_wait(flow::WaitKind kind, const std::vector<Condition>& conditions, flow::Wait* proto) {
  proto->set_kind(kind);
  for (const auto& c : conditions) *proto->add_conditions() = c.proto();
  return {};
}
}  // namespace

Wait Wait::any_of(std::vector<Condition> conditions) {
  Wait w;
  make_wait(flow::ANY_OF, conditions, &w.proto_);
  return w;
}
Wait Wait::all_of(std::vector<Condition> conditions) {
  Wait w;
  make_wait(flow::ALL_OF, conditions, &w.proto_);
  return w;
}
Wait Wait::any_combination_of(std::vector<std::vector<std::string>> groups,
                              std::vector<Condition> conditions) {
  Wait w;
  make_wait(flow::ANY_COMBINATION_OF, conditions, &w.proto_);
  for (const auto& g : groups) {
    auto* group = w.proto_.add_combinations();
    for (const auto& id : g) group->add_condition_ids(id);
  }
  return w;
}
Wait Wait::skip() {
  Wait w;
  w.proto_.set_kind(flow::SKIP);
  return w;
}

// ---------------------------------------------------------------- options

namespace {
flow::MethodOptions method_proto(const MethodOptions& m, bool execute) {
  flow::MethodOptions p;
  p.set_attempt_timeout_ms(m.attempt_timeout.count());
  *p.mutable_retry() = m.retry.proto();
  if (!execute && m.proceed_to_execute_on_failure) p.set_failure_policy(flow::PROCEED_TO_EXECUTE);
  if (execute && !m.recovery_step.empty()) {
    p.set_failure_policy(flow::PROCEED_TO_STEP);
    p.set_recovery_step_type(m.recovery_step);
  }
  if (m.async) p.set_durability(flow::ASYNC);
  p.set_heartbeat_timeout_ms(m.heartbeat_timeout.count());
  for (const auto& k : m.lock_keys) p.add_lock_keys(k);
  return p;
}
}  // namespace

flow::StepOptions StepOptions::proto() const {
  flow::StepOptions p;
  *p.mutable_wait_for() = method_proto(wait_for, false);
  *p.mutable_execute() = method_proto(execute, true);
  return p;
}

// ---------------------------------------------------------------- decisions

namespace {
void add_movement(google::protobuf::RepeatedPtrField<flow::StepMovement>* out, const Movement& m) {
  auto* p = out->Add();
  p->set_step_type(m.step_type);
  *p->mutable_input() = to_payload(m.input);
  if (m.options) *p->mutable_options() = m.options->proto();
}
}  // namespace

StepDecision StepDecision::go_to(std::string step_type, json input) {
  return go_to_multi({Movement{std::move(step_type), std::move(input), std::nullopt}});
}
StepDecision StepDecision::go_to_multi(std::vector<Movement> movements) {
  StepDecision d;
  auto* go = d.proto_.mutable_go_to();
  for (const auto& m : movements) add_movement(go->mutable_movements(), m);
  return d;
}
StepDecision StepDecision::graceful_complete(json output) {
  StepDecision d;
  *d.proto_.mutable_graceful_complete() = to_payload(output);
  return d;
}
StepDecision StepDecision::force_complete(json output) {
  StepDecision d;
  *d.proto_.mutable_force_complete() = to_payload(output);
  return d;
}
StepDecision StepDecision::force_fail(std::string reason) {
  StepDecision d;
  d.proto_.set_force_fail(std::move(reason));
  return d;
}
StepDecision StepDecision::dead_end() {
  StepDecision d;
  d.proto_.mutable_dead_end();
  return d;
}
StepDecision StepDecision::force_complete_if_channels_empty(std::vector<Channel> channels,
                                                            std::vector<ChannelMap> maps,
                                                            json output,
                                                            std::vector<Movement> otherwise) {
  StepDecision d;
  auto* c = d.proto_.mutable_force_complete_if_channels_empty();
  for (const auto& ch : channels) {
    auto* ref = c->add_channels();
    ref->set_channel(ch.name());
    ref->set_instance_key(ch.instance_key());
  }
  for (const auto& m : maps) {
    auto* ref = c->add_channels();
    ref->set_channel(m.name());
    ref->set_all_instances(true);
  }
  *c->mutable_output() = to_payload(output);
  for (const auto& m : otherwise) add_movement(c->mutable_otherwise(), m);
  return d;
}
StepDecision& StepDecision::cancel_steps(std::vector<std::string> step_types) {
  for (auto& t : step_types) proto_.add_cancel_step_types(std::move(t));
  return *this;
}
StepDecision& StepDecision::cancel_siblings() {
  proto_.set_cancel_siblings(true);
  return *this;
}
StepDecision& StepDecision::continue_as_new() {
  proto_.set_continue_as_new(true);
  return *this;
}

// ---------------------------------------------------------------- context

const std::string Context::kNone;

Context::Context(const flow::FlowTask& task, json input, std::function<void()> heartbeat,
                 std::function<bool()> cancelled, const sdk_internal::AttributeScope* attributes)
    : task_(task),
      input_(std::move(input)),
      attributes_(attributes),
      heartbeat_(std::move(heartbeat)),
      cancelled_(std::move(cancelled)) {
  if (task.method() == flow::EXECUTE && !task.locals().data().empty()) {
    locals_ = from_payload(task.locals());
    if (!locals_.is_object()) locals_ = json::object();
  }
  for (const auto& a : task.attributes()) {
    if (a.has_value()) values_[a.key()][a.instance_key()] = a.value();
  }
}

void Context::check_attribute(const AttributeDef& def, bool read) const {
  const std::string flow = "Flow type '" + task_.flow_type() + "'";
  const std::string reader = attributes_ != nullptr ? attributes_->reader : "this method";
  auto declared = attributes_ == nullptr ? nullptr : [&]() -> const AttributeDef* {
    auto it = attributes_->schema.find(def.key());
    return it == attributes_->schema.end() ? nullptr : &it->second;
  }();
  if (declared == nullptr) {
    throw AttributeError("Attribute '" + def.key() + "' is not declared by " + flow +
                         " (Flow::attributes())");
  }
  if (declared->type() != def.type() || declared->is_map() != def.is_map()) {
    throw AttributeError(def.describe() + " does not match its declaration by " + flow + ": " +
                         declared->describe());
  }
  if (read && std::find(attributes_->reads.begin(), attributes_->reads.end(), def.key()) ==
                  attributes_->reads.end()) {
    std::string reads;
    for (const auto& k : attributes_->reads) reads += (reads.empty() ? "" : ", ") + k;
    throw AttributeError(reader + " does not read Attribute '" + def.key() +
                         "' (its attribute_reads: " + (reads.empty() ? "none" : reads) +
                         "): its tasks do not carry it");
  }
}

void Context::set_local(const std::string& key, json value) { locals_[key] = std::move(value); }

json Context::local(const std::string& key) const {
  auto it = locals_.find(key);
  return it == locals_.end() ? json(nullptr) : *it;
}

bool Context::timer_fired() const {
  for (const auto& c : task_.conditions())
    if (c.fired() && c.condition().has_timer()) return true;
  return false;
}

bool Context::fired(const std::string& condition_id) const {
  for (const auto& c : task_.conditions())
    if (c.condition_id() == condition_id) return c.fired();
  return false;
}

bool Context::fired(uint32_t condition_index) const {
  for (const auto& c : task_.conditions())
    if (c.index() == condition_index) return c.fired();
  return false;
}

std::vector<json> Context::messages(const Channel& channel) const {
  std::vector<json> out;
  for (const auto& c : task_.conditions()) {
    if (!c.condition().has_channel() || c.condition().channel().channel() != channel.name() ||
        c.condition().channel().instance_key() != channel.instance_key())
      continue;
    for (const auto& m : c.messages()) out.push_back(from_payload(m));
  }
  return out;
}

void Context::publish(const Channel& channel, json message) {
  if (!publishes_.empty() && publishes_.back().channel() == channel.name() &&
      publishes_.back().instance_key() == channel.instance_key()) {
    *publishes_.back().add_messages() = to_payload(message);
    return;
  }
  flow::Publish p;
  p.set_channel(channel.name());
  p.set_instance_key(channel.instance_key());
  *p.add_messages() = to_payload(message);
  publishes_.push_back(std::move(p));
}

std::map<std::string, uint64_t> Context::queue_sizes(const std::string& name) const {
  if (task_.channel_sizes_truncated())
    throw FlowFailure("Channel '" + name +
                          "': the run has more than 10,000 queues holding messages; the task "
                          "carries only the first 10,000, so sizes are not known",
                      /*non_retryable=*/true);
  std::map<std::string, uint64_t> sizes;
  for (const auto& c : task_.channel_sizes())  // bounded by the task's 10,000 queues
    if (c.channel() == name) sizes[c.instance_key()] += c.size();
  for (const auto& p : publishes_)  // bounded by this method's publishes
    if (p.channel() == name) sizes[p.instance_key()] += static_cast<uint64_t>(p.messages_size());
  return sizes;
}

uint64_t Context::channel_size(const Channel& channel) const {
  auto sizes = queue_sizes(channel.name());
  auto it = sizes.find(channel.instance_key());
  return it == sizes.end() ? 0 : it->second;
}

size_t Context::channel_map_size(const ChannelMap& map) const {
  return queue_sizes(map.name()).size();
}

std::vector<std::string> Context::channel_instance_keys(const ChannelMap& map) const {
  std::vector<std::string> keys;
  for (const auto& [key, size] : queue_sizes(map.name())) keys.push_back(key);
  return keys;
}

// ---------------------------------------------------------------- Flow

flow::FlowDeclaration Flow::declaration() const {
  flow::FlowDeclaration d;
  d.set_flow_type(type());
  d.set_start_step_type(start_step());
  for (const auto& s : steps()) {
    auto* step = d.add_steps();
    step->set_step_type(s->type());
    step->set_has_wait_for(s->waits());
    *step->mutable_options() = s->options().proto();
    AttributeReads reads = s->attribute_reads();
    if (reads.is_all()) {
      for (const auto& a : attributes()) step->add_attribute_reads(a.key());
    } else {
      for (const auto& k : reads.keys()) step->add_attribute_reads(k);
    }
  }
  for (const auto& c : channels()) d.add_channels()->set_name(c.name());
  for (const auto& m : channel_maps()) {
    auto* c = d.add_channels();
    c->set_name(m.name());
    c->set_is_map(true);
  }
  const std::vector<AttributeDef> schema = attributes();
  for (const auto& a : schema) *d.add_attributes() = a.declaration();
  d.set_attribute_store(attribute_store());
  if (const flow::FlowConfig c = config(); c.ByteSizeLong() > 0) *d.mutable_config() = c;
  for (const auto& r : rpcs()) {
    auto* rpc = d.add_rpcs();
    rpc->set_name(r.name());
    for (const auto& k : r.options().lock_keys) rpc->add_lock_keys(k);
    if (r.options().attribute_reads.is_all()) {
      for (const auto& a : schema) rpc->add_attribute_reads(a.key());
    } else {
      for (const auto& k : r.options().attribute_reads.keys()) rpc->add_attribute_reads(k);
    }
  }
  if (has_timeout_handler()) {
    d.set_has_timeout_handler(true);
    auto* h = d.mutable_on_timeout();
    *h->mutable_options() = method_proto(timeout_handler_options(), true);
    const AttributeReads reads = timeout_handler_reads();
    if (reads.is_all()) {
      for (const auto& a : schema) h->add_attribute_reads(a.key());
    } else {
      for (const auto& k : reads.keys()) h->add_attribute_reads(k);
    }
  }
  return d;
}

StepDecision Flow::on_timeout(Context&) {
  throw FlowFailure("Flow type '" + type() + "' has no timeout handler (on_timeout)", true);
}

Status Flow::validate() const {
  const std::string flow = "Flow type '" + type() + "'";
  std::set<std::string> keys;
  std::map<std::string, std::string> index_keys;  // index key -> the Attribute that takes it
  for (const auto& a : attributes()) {
    if (a.key().empty()) return Status::invalid_argument(flow + " declares an empty Attribute key");
    if (!keys.insert(a.key()).second) {
      return Status::invalid_argument(flow + " declares Attribute '" + a.key() + "' twice");
    }
    if (!a.indexed()) continue;
    auto [it, added] = index_keys.emplace(a.index_key(), a.key());
    if (!added) {
      return Status::invalid_argument(flow + " gives Attributes '" + it->second + "' and '" +
                                      a.key() + "' the same index key '" + a.index_key() + "'");
    }
  }
  if (const std::string store = attribute_store(); !store.empty()) {
    const std::string what = flow + ": its attribute_store";
    if (store.size() > kNameBytesMax) {
      return Status::invalid_argument(what + " is longer than " + std::to_string(kNameBytesMax) +
                                      " bytes");
    }
    for (unsigned char c : store) {
      if (c < 0x20 || c == 0x7f)
        return Status::invalid_argument(what + " contains a control character");
    }
  }
  if (index_keys.size() > kIndexedAttributesMax) {
    return Status::invalid_argument(flow + " declares " + std::to_string(index_keys.size()) +
                                    " indexed Attributes; the limit is " +
                                    std::to_string(kIndexedAttributesMax));
  }
  auto check_reads = [&](const AttributeReads& reads, const std::string& who) -> Status {
    for (const auto& k : reads.keys()) {
      if (keys.count(k) == 0) {
        return Status::invalid_argument(flow + ": " + who + " reads Attribute '" + k +
                                        "', which the Flow does not declare");
      }
    }
    return Status::ok();
  };
  for (const auto& s : steps()) {
    if (Status st = check_reads(s->attribute_reads(), "Step '" + s->type() + "'"); !st.is_ok())
      return st;
  }
  std::set<std::string> names;
  for (const auto& r : rpcs()) {
    if (r.name().empty()) return Status::invalid_argument(flow + " declares an RPC with no name");
    if (!names.insert(r.name()).second) {
      return Status::invalid_argument(flow + " declares RPC '" + r.name() + "' twice");
    }
    if (Status st = check_reads(r.options().attribute_reads, "RPC '" + r.name() + "'"); !st.is_ok())
      return st;
  }
  if (has_timeout_handler()) {
    const MethodOptions o = timeout_handler_options();
    if (!o.lock_keys.empty())
      return Status::invalid_argument(flow + ": the timeout handler cannot take lock keys");
    if (o.proceed_to_execute_on_failure || !o.recovery_step.empty())
      return Status::invalid_argument(
          flow +
          ": the timeout handler has no failure policy (a handler that fails for good "
          "ends the run TIMED_OUT)");
    if (Status st = check_reads(timeout_handler_reads(), "the timeout handler"); !st.is_ok())
      return st;
  }
  return Status::ok();
}

namespace {

sdk_internal::AttributeScope attribute_scope(const Flow& flow, std::string reader,
                                             const AttributeReads& reads) {
  sdk_internal::AttributeScope scope;
  scope.flow_type = flow.type();
  scope.reader = std::move(reader);
  for (const auto& a : flow.attributes()) {
    scope.schema.emplace(a.key(), a);
    if (reads.is_all()) scope.reads.push_back(a.key());
  }
  if (!reads.is_all()) scope.reads = reads.keys();
  return scope;
}

json task_input(const flow::FlowTask& task, const std::string& what) {
  try {
    return from_payload(task.input());
  } catch (const json::exception& e) {
    throw FlowFailure("the " + what + " input is not valid JSON: " + e.what(), true);
  }
}

void take_effects(const Context& context, flow::FlowTaskResult& result) {
  for (const auto& p : context.publishes()) *result.add_publishes() = p;
  for (const auto& w : context.attribute_writes()) *result.add_attribute_writes() = w;
}

void run_rpc(Flow& flow, const flow::FlowTask& task, const std::function<void()>& heartbeat,
             const std::function<bool()>& cancelled, flow::FlowTaskResult& result) {
  std::optional<Rpc> rpc;
  for (auto& r : flow.rpcs())
    if (r.name() == task.rpc_name()) rpc = std::move(r);
  if (!rpc) {
    throw FlowFailure(
        "Flow type '" + flow.type() + "' in this Worker has no RPC '" + task.rpc_name() + "'",
        true);
  }
  const json input = task_input(task, "RPC");
  const auto scope =
      attribute_scope(flow, "RPC '" + rpc->name() + "'", rpc->options().attribute_reads);
  Context context(task, input, heartbeat, cancelled, &scope);
  RpcResult out = rpc->call(context, input);
  auto* r = result.mutable_rpc();
  *r->mutable_output() = to_payload(out.output);
  for (const auto& m : out.next_steps) add_movement(r->mutable_next_steps(), m);
  take_effects(context, result);
}

void run_timeout_handler(Flow& flow, const flow::FlowTask& task,
                         const std::function<void()>& heartbeat,
                         const std::function<bool()>& cancelled, flow::FlowTaskResult& result) {
  if (!flow.has_timeout_handler()) {
    throw FlowFailure("Flow type '" + flow.type() + "' in this Worker has no timeout handler",
                      true);
  }
  const auto scope = attribute_scope(flow, "the timeout handler", flow.timeout_handler_reads());
  Context context(task, task_input(task, "run's"), heartbeat, cancelled, &scope);
  *result.mutable_decision() = flow.on_timeout(context).proto();
  take_effects(context, result);
}

void run_step(Flow& flow, const flow::FlowTask& task, const std::function<void()>& heartbeat,
              const std::function<bool()>& cancelled, flow::FlowTaskResult& result) {
  std::shared_ptr<Step> step;
  for (auto& s : flow.steps())
    if (s->type() == task.step_type()) step = s;
  if (!step)
    throw FlowFailure("Flow type '" + flow.type() + "' in this Worker has no Step type '" +
                          task.step_type() + "'",
                      false);
  const auto scope = attribute_scope(flow, "Step '" + step->type() + "'", step->attribute_reads());
  Context context(task, task_input(task, "Step"), heartbeat, cancelled, &scope);
  if (task.method() == flow::WAIT_FOR) {
    *result.mutable_wait() = step->wait_for(context).proto();
    if (!context.locals().empty()) *result.mutable_locals() = to_payload(context.locals());
  } else {
    *result.mutable_decision() = step->execute(context).proto();
  }
  take_effects(context, result);
}

}  // namespace

flow::FlowTaskResult run_flow_task(Flow& flow, const flow::FlowTask& task,
                                   const std::function<void()>& heartbeat,
                                   const std::function<bool()>& cancelled) {
  flow::FlowTaskResult result;
  result.set_task_id(task.task_id());
  auto fail = [&](const std::string& message, bool non_retryable,
                  std::chrono::milliseconds retry_after = std::chrono::milliseconds(0)) {
    result.clear_result();
    result.clear_publishes();
    result.clear_locals();
    result.clear_attribute_writes();
    result.mutable_error()->set_message(message);
    result.mutable_error()->set_non_retryable(non_retryable);
    result.mutable_error()->set_retry_after_ms(retry_after.count());
  };
  try {
    if (task.method() == flow::RPC) {
      run_rpc(flow, task, heartbeat, cancelled, result);
    } else if (task.method() == flow::ON_TIMEOUT) {
      run_timeout_handler(flow, task, heartbeat, cancelled, result);
    } else {
      run_step(flow, task, heartbeat, cancelled, result);
    }
  } catch (const FlowFailure& e) {
    fail(e.what(), e.non_retryable(), e.retry_after());
  } catch (const AttributeError& e) {
    fail(e.what(), true);  // a misused Attribute fails again on every attempt
  } catch (const std::exception& e) {
    fail(e.what(), false);
  } catch (...) {
    fail(task.method() == flow::RPC          ? "the RPC handler threw a non-standard exception"
         : task.method() == flow::ON_TIMEOUT ? "the timeout handler threw a non-standard exception"
                                             : "the Step threw a non-standard exception",
         false);
  }
  return result;
}

// ---------------------------------------------------------------- Attributes
// The Context's side of Attribute<T> and AttributeMap<T> (attribute.h).

namespace sdk_internal {

std::optional<flow::AttributeValue> read_attribute(const Context& context, const AttributeDef& def,
                                                   const std::string& instance_key) {
  context.check_attribute(def, /*read=*/true);
  if (def.is_map() && instance_key.empty()) {
    throw AttributeError("AttributeMap '" + def.key() + "': the instance key is empty");
  }
  auto key = context.values_.find(def.key());
  if (key == context.values_.end()) return std::nullopt;
  auto it = key->second.find(instance_key);
  if (it == key->second.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> attribute_instances(const Context& context, const AttributeDef& def) {
  context.check_attribute(def, /*read=*/true);
  std::vector<std::string> out;
  auto key = context.values_.find(def.key());
  if (key == context.values_.end()) return out;
  for (const auto& [instance, value] : key->second) out.push_back(instance);
  return out;
}

void write_attribute(Context& context, const AttributeDef& def, const std::string& instance_key,
                     std::optional<flow::AttributeValue> value) {
  context.check_attribute(def, /*read=*/false);
  if (def.is_map() && instance_key.empty()) {
    throw AttributeError("AttributeMap '" + def.key() + "': the instance key is empty");
  }
  flow::Attribute write;
  write.set_key(def.key());
  write.set_instance_key(instance_key);
  auto& instances = context.values_[def.key()];
  if (value) {
    *write.mutable_value() = *value;
    instances[instance_key] = *std::move(value);
  } else {
    instances.erase(instance_key);
  }
  context.attribute_writes_.push_back(std::move(write));
}

}  // namespace sdk_internal

// ---------------------------------------------------------------- SubFlows
// What Execute reads of its SubFlow conditions' children (sub_flow.h).

namespace {

SubFlowResult typed(const flow::ConditionResult& c) {
  const flow::SubFlowResult& r = c.sub_flow();
  SubFlowResult out;
  out.condition_index = c.index();
  out.condition_id = c.condition_id();
  out.fired = c.fired();
  out.flow_id = r.flow_id();
  out.run_id = r.run_id();
  out.status = r.status();
  out.close_reason = r.close_reason();
  for (const auto& o : r.outputs()) {  // bounded by the child's result
    FlowOutput typed_output{o.step_type(), o.step_execution_id(), nullptr};
    try {
      typed_output.output = from_payload(o.output());
    } catch (const nlohmann::json::exception& e) {
      throw FlowFailure("the output of SubFlow '" + r.flow_id() + "' (" + o.step_execution_id() +
                            ") is not valid JSON: " + e.what(),
                        true);
    }
    out.outputs.push_back(std::move(typed_output));
  }
  return out;
}

bool is_sub_flow(const flow::ConditionResult& c) {
  return c.condition().has_sub_flow() || c.has_sub_flow();
}

}  // namespace

SubFlowResult Context::sub_flow(uint32_t condition_index) const {
  for (const auto& c : task_.conditions()) {
    if (c.index() == condition_index && is_sub_flow(c)) return typed(c);
  }
  throw FlowFailure("Step '" + task_.step_type() + "': condition " +
                        std::to_string(condition_index) + " of its wait is not a SubFlow",
                    true);
}

SubFlowResult Context::sub_flow(const std::string& condition_id) const {
  for (const auto& c : task_.conditions()) {
    if (c.condition_id() == condition_id && is_sub_flow(c)) return typed(c);
  }
  throw FlowFailure(
      "Step '" + task_.step_type() + "': its wait has no SubFlow condition '" + condition_id + "'",
      true);
}

std::vector<SubFlowResult> Context::sub_flows() const {
  std::vector<SubFlowResult> out;
  for (const auto& c : task_.conditions()) {  // bounded by the wait's conditions
    if (is_sub_flow(c)) out.push_back(typed(c));
  }
  return out;
}

}  // namespace dex
