// dexcli: the dex command-line client. `inspect` reads a node's lease and log
// straight from a dev/local data directory (read-only) and prints JSON; the
// flow and admin commands over gRPC come with the API issues.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "config/config.h"
#include "lease/lease_record.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "objstore/filesystem_store.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int fail(const std::string& message) {
  std::cerr << "dexcli: " << message << "\n";
  return 1;
}

// Opens <data-dir>/objects without creating anything.
dex::StatusOr<std::unique_ptr<dex::FilesystemObjectStore>> open_objects(
    const std::string& data_dir) {
  fs::path objects = fs::path(data_dir) / "objects";
  if (!fs::is_directory(objects)) {
    return dex::Status::not_found("no dex data in " + data_dir + " (no objects/ directory)");
  }
  return dex::FilesystemObjectStore::open(objects, dex::Durability::kProcessCrashSafe);
}

const char* record_kind(const dex::proto::LogRecord& record) {
  switch (record.kind_case()) {
    case dex::proto::LogRecord::kEpochStart:
      return "epochStart";
    case dex::proto::LogRecord::kOpaque:
      return "opaque";
    default:
      return "unknown";
  }
}

int inspect_lease(const std::string& data_dir, const std::string& node_id) {
  auto store = open_objects(data_dir);
  if (!store.is_ok()) return fail(store.status().message());
  auto data = store.value()->get(dex::lease_key(dex::NodeId(node_id)));
  if (!data.is_ok()) return fail("reading the lease: " + data.status().to_string());
  auto record = dex::decode_lease_record(data->body);
  if (!record.is_ok()) return fail("the lease object is not valid: " + record.status().to_string());
  json out = {
      {"nodeId", record->node_id.value},
      {"nodeEpoch", record->epoch.to_string()},  // epochs print as decimal strings
      {"holderProcessId", record->holder_process_id.value},
      {"leaseDuration", dex::format_duration(record->duration)},
      {"renewalCount", record->renewal_count},
      {"released", record->released},
      {"etag", data->etag},
  };
  std::cout << out.dump(2) << "\n";
  return 0;
}

int inspect_log(const std::string& data_dir, const std::string& node_id, uint64_t limit) {
  auto store = open_objects(data_dir);
  if (!store.is_ok()) return fail(store.status().message());
  dex::NodeId node(node_id);
  auto bounds = dex::find_log_bounds(*store.value(), node);
  if (!bounds.is_ok()) return fail("listing the log: " + bounds.status().to_string());
  dex::LogReader reader(*store.value(), node, bounds->first);
  json batches = json::array();
  dex::Status s = reader.read_to_end([&](const dex::LogEntry& entry) {
    if (batches.size() >= limit) return dex::Status::ok();
    json kinds = json::array();
    for (const auto& record : entry.batch.records()) kinds.push_back(record_kind(record));
    batches.push_back({{"slot", entry.slot.to_string()},
                       {"epoch", std::to_string(entry.batch.epoch())},
                       {"writerProcessId", entry.batch.writer_process_id()},
                       {"records", entry.batch.records_size()},
                       {"kinds", kinds}});
    return dex::Status::ok();
  });
  if (!s.is_ok()) return fail("reading the log: " + s.to_string());
  json out = {{"nodeId", node_id},
              {"firstSlot", bounds->first.to_string()},
              {"endSlot", bounds->end.to_string()},
              {"skippedLowerEpochBatches", reader.skipped()},
              {"batches", batches}};
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dexcli: the dex command-line client"};
  app.require_subcommand(1);

  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "Read a node's durable state from a dev data directory (read-only) and print JSON");
  inspect->require_subcommand(1);
  std::string data_dir = ".dex-data";
  std::string node_id = "dev";
  uint64_t limit = 1000;
  CLI::App* lease = inspect->add_subcommand(
      "lease", "Print the lease record: nodeId, nodeEpoch, holderProcessId, duration, released");
  CLI::App* log = inspect->add_subcommand("log", "Print the log's batches in slot order");
  for (CLI::App* cmd : {lease, log}) {
    cmd->add_option("--data-dir", data_dir, "Data directory of dex-server-zd dev")
        ->capture_default_str();
    cmd->add_option("--node-id", node_id, "Node ID")->capture_default_str();
  }
  log->add_option("--limit", limit, "Print at most this many batches")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  CLI11_PARSE(app, argc, argv);
  if (auto s = dex::validate_node_id(node_id); !s.is_ok()) return fail(s.message());
  if (*lease) return inspect_lease(data_dir, node_id);
  if (*log) return inspect_log(data_dir, node_id, limit);
  return 2;
}
