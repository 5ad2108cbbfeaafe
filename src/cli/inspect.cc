#include "cli/inspect.h"

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "config/config.h"
#include "lease/lease_record.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "objstore/store_settings.h"

namespace dex::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr int kExitFailed = 1;

int fail(const std::string& message) {
  std::cerr << "dexcli: " << message << "\n";
  return kExitFailed;
}

int print(const json& out) {
  std::cout << out.dump(2) << "\n";
  return 0;
}

// Opens the store read-only: nothing is created, nothing is written.
StatusOr<std::unique_ptr<ObjectStore>> open_source(const InspectSource& source) {
  if (source.config_file.empty()) {
    const ObjectStoreSettings objects =
        data_dir_object_store(source.data_dir, Durability::kProcessCrashSafe);
    if (!fs::is_directory(objects.path)) {
      return Status::not_found("no dex data in " + source.data_dir + " (no objects/ directory)");
    }
    return open_object_store(objects, StoreAccess::kReadOnly);
  }
  auto config = load_serve_config_file(source.config_file);
  if (!config.is_ok()) return config.status();
  return open_object_store(config->object_store, StoreAccess::kReadOnly);
}

// "epochStart", "opaque", or "flow.<kind>" for the flow rules' records
// ("flow.startFlow", "flow.methodResult", ...: the camelCase name of the
// FlowRecord's kind, read from its descriptor so that a new kind needs no change here).
std::string record_kind(const proto::LogRecord& record) {
  switch (record.kind_case()) {
    case proto::LogRecord::kEpochStart:
      return "epochStart";
    case proto::LogRecord::kOpaque:
      return "opaque";
    case proto::LogRecord::kFlow: {
      const auto& flow = record.flow();
      const auto* oneof = flow.GetDescriptor()->FindOneofByName("kind");
      const auto* field =
          oneof != nullptr ? flow.GetReflection()->GetOneofFieldDescriptor(flow, oneof) : nullptr;
      return field != nullptr ? "flow." + field->json_name() : "flow.unknown";
    }
    default:
      return "unknown";
  }
}

json batch_json(const proto::LogBatch& batch, bool records) {
  json kinds = json::array();
  for (const auto& record : batch.records()) kinds.push_back(record_kind(record));
  json out = {{"slot", std::to_string(batch.slot())},
              {"epoch", std::to_string(batch.epoch())},
              {"writerProcessId", batch.writer_process_id()},
              {"records", batch.records_size()},
              {"kinds", kinds}};
  if (records) {
    out["writeId"] = batch.write_id();
    json details = json::array();
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = false;  // camelCase, as the API's JSON
    for (const auto& record : batch.records()) {
      std::string text;
      if (google::protobuf::util::MessageToJsonString(record, &text, options).ok()) {
        details.push_back(json::parse(text, nullptr, /*allow_exceptions=*/false));
      } else {
        details.push_back(json{{"error", "not representable as JSON"}});
      }
    }
    out["recordDetails"] = details;
  }
  return out;
}

}  // namespace

StatusOr<std::string> inspect_config_node_id(const std::string& config_file) {
  auto config = load_serve_config_file(config_file);
  if (!config.is_ok()) return config.status();
  return config->node_id;
}

int inspect_lease(const InspectSource& source, const std::string& node_id) {
  auto store = open_source(source);
  if (!store.is_ok()) return fail(store.status().message());
  auto data = store.value()->get(lease_key(NodeId(node_id)));
  if (!data.is_ok()) return fail("reading the lease: " + data.status().to_string());
  auto record = decode_lease_record(data->body);
  if (!record.is_ok()) return fail("the lease object is not valid: " + record.status().to_string());
  json out = {
      {"nodeId", record->node_id.value},
      {"nodeEpoch", record->epoch.to_string()},  // epochs print as decimal strings
      {"holderProcessId", record->holder_process_id.value},
      {"leaseDuration", format_duration(record->duration)},
      {"renewalCount", record->renewal_count},
      {"released", record->released},
      {"etag", data->etag},
  };
  return print(out);
}

int inspect_log(const InspectSource& source, const std::string& node_id,
                const InspectLogFlags& flags) {
  auto store = open_source(source);
  if (!store.is_ok()) return fail(store.status().message());
  NodeId node(node_id);
  auto bounds = find_log_bounds(*store.value(), node);
  if (!bounds.is_ok()) return fail("listing the log: " + bounds.status().to_string());
  const Slot start =
      flags.from_slot ? Slot(std::max(*flags.from_slot, bounds->first.value)) : bounds->first;
  LogReader reader(*store.value(), node, start);
  json batches = json::array();
  uint64_t missing = 0;
  if (flags.raw) {
    // Bounded by the listing's end and --limit.
    for (uint64_t slot = start.value; slot < bounds->end.value && batches.size() < flags.limit;
         ++slot) {
      auto read = reader.read(Slot(slot));
      if (!read.is_ok()) {
        return fail("reading slot " + std::to_string(slot) + ": " + read.status().to_string());
      }
      if (!read->has_value()) {
        ++missing;
        batches.push_back({{"slot", std::to_string(slot)}, {"missing", true}});
        continue;
      }
      batches.push_back(batch_json(read->value(), flags.records));
    }
  } else {
    Status s = reader.read_to_end([&](const LogEntry& entry) {
      if (batches.size() >= flags.limit) return Status::ok();
      batches.push_back(batch_json(entry.batch, flags.records));
      return Status::ok();
    });
    if (!s.is_ok()) return fail("reading the log: " + s.to_string());
  }
  json out = {{"nodeId", node_id},
              {"firstSlot", bounds->first.to_string()},
              {"endSlot", bounds->end.to_string()},
              {"skippedLowerEpochBatches", reader.skipped()}};
  if (flags.raw) out["missingSlots"] = missing;
  out["batches"] = batches;
  return print(out);
}

}  // namespace dex::cli
