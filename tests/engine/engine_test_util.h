// Helpers shared by the engine tests: temporary store directories and records.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>

#include "dex/engine.pb.h"
#include "dex/records.pb.h"
#include "engine/flow_type.h"

namespace dex::testing {

// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("dex-engine-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path sub(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline FlowType must_parse(const std::string& text) {
  auto t = parse_flow_type(text);
  if (!t.is_ok()) throw std::runtime_error(t.status().to_string());
  return t.value();
}

inline proto::LogRecord engine_record(proto::EngineRecord rec) {
  proto::LogRecord r;
  *r.mutable_engine() = std::move(rec);
  return r;
}

inline proto::LogRecord register_type(const FlowType& type) {
  proto::EngineRecord rec;
  *rec.mutable_register_flow_type()->mutable_flow_type() = type;
  return engine_record(rec);
}

inline proto::LogRecord start_flow(const std::string& id, const std::string& type,
                                   const std::string& input, int64_t at) {
  proto::EngineRecord rec;
  auto* s = rec.mutable_start_flow();
  s->set_flow_id(id);
  s->set_flow_type(type);
  s->set_input(input);
  s->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord attempt_started(const std::string& flow, const std::string& step,
                                        uint32_t attempt, const std::string& task, int64_t at) {
  proto::EngineRecord rec;
  auto* s = rec.mutable_attempt_started();
  s->set_flow_id(flow);
  s->set_step(step);
  s->set_attempt(attempt);
  s->set_task_id(task);
  s->set_worker_id("w1");
  s->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord attempt_ended(const std::string& flow, const std::string& step,
                                      const std::string& task, AttemptOutcome outcome,
                                      const std::string& output_or_error, int64_t at,
                                      bool non_retryable = false) {
  proto::EngineRecord rec;
  auto* e = rec.mutable_attempt_ended();
  e->set_flow_id(flow);
  e->set_step(step);
  e->set_task_id(task);
  e->set_outcome(outcome);
  if (outcome == ATTEMPT_OUTCOME_COMPLETED) {
    e->set_output(output_or_error);
  } else {
    e->set_error(output_or_error);
  }
  e->set_non_retryable(non_retryable);
  e->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord attempt_withdrawn(const std::string& flow, const std::string& step,
                                          const std::string& task, int64_t at) {
  proto::EngineRecord rec;
  auto* w = rec.mutable_attempt_withdrawn();
  w->set_flow_id(flow);
  w->set_step(step);
  w->set_task_id(task);
  w->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord timer_fired(const std::string& flow, const std::string& step,
                                    int64_t wake_at, int64_t at) {
  proto::EngineRecord rec;
  auto* t = rec.mutable_timer_fired();
  t->set_flow_id(flow);
  t->set_step(step);
  t->set_wake_at_ms(wake_at);
  t->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord cancel_flow(const std::string& flow, int64_t at) {
  proto::EngineRecord rec;
  auto* c = rec.mutable_cancel_flow();
  c->set_flow_id(flow);
  c->set_at_unix_ms(at);
  return engine_record(rec);
}

inline proto::LogRecord epoch_start(const std::string& holder, int64_t at) {
  proto::LogRecord r;
  r.mutable_epoch_start()->set_holder_process_id(holder);
  r.mutable_epoch_start()->set_at_unix_ms(at);
  return r;
}

}  // namespace dex::testing
