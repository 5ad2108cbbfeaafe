#include "cli/time_travel_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "cli/flow_errors.h"
#include "cli/proto_json.h"
#include "cli/time_travel_point.h"
#include "common/random.h"
#include "sdk/client.h"

namespace dex::cli {

namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr const char* kOp = "flow time-travel";

constexpr const char* kHelp =
    "Start a new run of a Flow ID from a point of its latest run's history: the state as it was "
    "there (Attributes, Channel messages, the Step executions active then, Timers with the time "
    "they had left), run with the Flow type's latest declaration (a fixed Worker). The old run "
    "keeps its history; if it still runs it ends TERMINATED. One run (ID --run-id RUN, exact), or "
    "every run --query selects (safe to run again: each run's request ID comes from the run and "
    "the point). --dry-run shows what the new run would start with. Changes runs: needs --yes";

constexpr const char* kExamples =
    "Points (--to): beginning | time:2027-01-15T10:00:00Z (or Unix ms, or 30m ago) |\n"
    "  step-type:Charge (its latest execution) | first-step-type:Charge | step:Charge-2\n"
    "Examples:\n"
    "  dexcli flow time-travel order-17 --run-id 6f1c... --to step-type:Charge --dry-run\n"
    "  dexcli flow time-travel order-17 --run-id 6f1c... --to step-type:Charge --yes\n"
    "  dexcli flow time-travel --query \"FlowType = 'Order' AND Status = 'FAILED' AND CloseTime > "
    "'2027-01-15T09:00:00Z'\" --to step-type:Charge --rate 20 --yes";

struct Outcome {
  int traveled = 0, already_done = 0, skipped = 0, failed = 0;
  json failures = json::array();  // the first kFailuresShown
  json skips = json::array();     // the first kFailuresShown
};
constexpr size_t kFailuresShown = 20;

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

struct TimeTravelCommand::Impl {
  CLI::App* cmd = nullptr;
  std::string flow_id, run_id, to_text, reason, request_id, query;
  bool dry_run = false, yes = false;
  double rate = 10;  // runs per second in a batch
  int limit = 10'000;
  flow::TimeTravelPoint point;

  int run_one(Client& client) const;
  int run_batch(Client& client) const;
  // The runs the query selects: (Flow ID, run ID), at most `limit`.
  Status collect(Client& client, std::vector<std::pair<std::string, std::string>>& runs,
                 bool& more) const;
  void progress(size_t done, size_t total, const Outcome& o, bool last) const;
};

TimeTravelCommand::TimeTravelCommand(CLI::App& flow) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cmd = flow.add_subcommand("time-travel", kHelp);
  m.cmd->footer(kExamples);
  m.cmd->add_option("ID", m.flow_id, "Flow ID (one run; or use --query)");
  m.cmd->add_option("--run-id", m.run_id, "The Flow ID's latest run, named exactly");
  m.cmd->add_option("--query", m.query,
                    "Time travel every run this search query selects (flow search's language)");
  m.cmd->add_option("--to", m.to_text, "Where in the run's history the new run starts")->required();
  m.cmd->add_option("--reason", m.reason, "Why: in both runs' history and the old run's close");
  m.cmd->add_option("--request-id", m.request_id,
                    "One run: makes a repeat answer the run the first made (default: a fresh ID)");
  m.cmd->add_option("--rate", m.rate, "A batch's runs per second, at most (default 10)")
      ->check(CLI::Range(0.1, 1000.0));
  m.cmd
      ->add_option("--limit", m.limit,
                   "A batch's most runs (default 10000): more selected is an error before "
                   "anything changes")
      ->check(CLI::Range(1, 1'000'000));
  m.cmd->add_flag("--dry-run", m.dry_run,
                  "Show what each new run would start with (state, active Steps); change nothing");
  m.cmd->add_flag("--yes", m.yes, "Required (unless --dry-run): confirms the time travel");
}

TimeTravelCommand::~TimeTravelCommand() = default;

bool TimeTravelCommand::chosen() const { return impl_->cmd->parsed(); }

int TimeTravelCommand::check() {
  Impl& m = *impl_;
  const bool batch = !m.query.empty();
  if (batch && !m.flow_id.empty())
    return usage_error(kOp, "give a Flow ID (one run) or --query (a batch), not both");
  if (!batch && m.flow_id.empty())
    return usage_error(kOp, "name the Flow ID (with --run-id) or give --query");
  if (!batch && m.run_id.empty())
    return usage_error(kOp,
                       "--run-id is required: time travel starts from the run you name, exactly "
                       "(flow describe ID shows the latest run's ID)");
  if (batch && (!m.run_id.empty() || !m.request_id.empty()))
    return usage_error(kOp,
                       "--run-id and --request-id are for one run; a batch takes each "
                       "run's from the search");
  if (!m.dry_run && !m.yes)
    return usage_error(kOp, "time travel changes runs: add --yes to confirm");
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  auto point = parse_point(m.to_text, now);
  if (!point.is_ok()) return usage_error(kOp, point.status().message());
  m.point = *point;
  return 0;
}

int TimeTravelCommand::run(Client& client) {
  return impl_->query.empty() ? impl_->run_one(client) : impl_->run_batch(client);
}

int TimeTravelCommand::Impl::run_one(Client& client) const {
  const std::string id = request_id.empty() ? random_hex_id() : request_id;
  auto r = client.time_travel(flow_id, run_id, point, reason, dry_run, id);
  if (!r.is_ok()) return request_error(kOp, r.status());
  json out = {{"flowId", flow_id}, {"fromRunId", run_id}, {"to", point_text(point)}};
  if (dry_run) {
    out["dryRun"] = true;
    out["start"] = proto_to_json(r->start());
    json attributes = json::array();
    for (const auto& a : r->attributes()) attributes.push_back(proto_to_json(a));
    out["attributes"] = attributes;
  } else {
    out["runId"] = r->run_id();
    out["alreadyDone"] = r->already_done();
    out["requestId"] = id;
  }
  std::cout << json_text(out, 2) << "\n";
  return 0;
}

Status TimeTravelCommand::Impl::collect(Client& client,
                                        std::vector<std::pair<std::string, std::string>>& runs,
                                        bool& more) const {
  more = false;
  return client.for_each_flow(query, [&](const flow::FlowSearchRow& row) {
    if (runs.size() >= static_cast<size_t>(limit)) {
      more = true;
      return false;
    }
    runs.emplace_back(row.flow_id(), row.run_id());
    return true;
  });
}

void TimeTravelCommand::Impl::progress(size_t done, size_t total, const Outcome& o,
                                       bool last) const {
  static const bool tty = ::isatty(STDERR_FILENO) != 0;
  // On a terminal a bar redrawn in place; in a log a line at every tenth.
  if (!tty && !last && (total < 10 || done % (total / 10) != 0)) return;
  constexpr size_t kWidth = 30;
  const size_t filled = total == 0 ? kWidth : done * kWidth / total;
  std::cerr << (tty ? "\r" : "") << "[" << std::string(filled, '=')
            << std::string(kWidth - filled, ' ') << "] " << done << "/" << total << "  "
            << (dry_run ? "checked " : "traveled ") << o.traveled << ", already done "
            << o.already_done << ", skipped " << o.skipped << ", failed " << o.failed
            << (tty && !last ? "" : "\n") << std::flush;
}

int TimeTravelCommand::Impl::run_batch(Client& client) const {
  std::vector<std::pair<std::string, std::string>> runs;
  bool more = false;
  if (Status s = collect(client, runs, more); !s.is_ok()) return request_error(kOp, s);
  if (more)
    return request_error(kOp, Status::invalid_argument(
                                  "the query selects more than --limit " + std::to_string(limit) +
                                  " runs: narrow it or raise --limit; nothing was changed"));
  Outcome o;
  const auto gap = std::chrono::duration<double>(1.0 / rate);
  auto next = Clock::now();
  for (size_t i = 0; i < runs.size(); ++i) {  // bounded by --limit
    std::this_thread::sleep_until(next);
    next = std::max(next + std::chrono::duration_cast<Clock::duration>(gap), Clock::now());
    const auto& [flow, run] = runs[i];
    auto r = client.time_travel(flow, run, point, reason, dry_run, batch_request_id(run, point));
    if (r.is_ok()) {
      ++(r->already_done() ? o.already_done : o.traveled);
    } else {
      const std::string& why = r.status().message();
      // A run that is not (or no longer) its Flow ID's latest, or whose point
      // does not exist, is left alone; anything else is a failure.
      const bool skip = starts_with(why, "FAILED_PRECONDITION") || starts_with(why, "NOT_FOUND");
      json item = {{"flowId", flow}, {"runId", run}, {"error", why}};
      if (skip) {
        ++o.skipped;
        if (o.skips.size() < kFailuresShown) o.skips.push_back(item);
      } else {
        ++o.failed;
        if (o.failures.size() < kFailuresShown) o.failures.push_back(item);
      }
    }
    progress(i + 1, runs.size(), o, i + 1 == runs.size());
  }
  json out = {{"query", query},
              {"to", point_text(point)},
              {"dryRun", dry_run},
              {"selected", runs.size()},
              {dry_run ? "wouldTravel" : "traveled", o.traveled},
              {"alreadyDone", o.already_done},
              {"skipped", o.skipped},
              {"failed", o.failed},
              {"skips", o.skips},
              {"failures", o.failures}};
  std::cout << json_text(out, 2) << "\n";
  return o.failed > 0 ? kExitFailed : 0;
}

}  // namespace dex::cli
