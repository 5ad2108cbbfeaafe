// The YAML config loaders (src/config/config.h): whatever text a config file
// holds, each loader answers settings or InvalidArgument naming the problem,
// never an exception. Accepted settings are valid (node ID, listen addresses,
// lease duration in range, ...), and a refused dev override changes nothing.
// The first line also goes through parse_duration, whose accepted values
// round-trip through format_duration.
//
// Input: YAML text. (auth.adminTokenFiles makes the serve loader read the files
// named; a fuzzer that spelled "/dev/zero" there would hang, which is the
// operator's choice of file, not a decoding bug.)
#include "config/config.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"

namespace dex::fuzz {
namespace {

bool same(const NodeSettings& a, const NodeSettings& b) {
  return a.node_id == b.node_id && a.data_dir == b.data_dir && a.listen == b.listen &&
         a.lease_duration == b.lease_duration && a.lease_fail_if_held == b.lease_fail_if_held &&
         a.durability == b.durability && a.snapshots.interval == b.snapshots.interval &&
         a.snapshots.every_records == b.snapshots.every_records &&
         a.snapshots.keep == b.snapshots.keep;
}

void check_common(std::string_view node_id, std::string_view listen, Duration lease,
                  const SnapshotSettings& snapshots) {
  FUZZ_CHECK(validate_node_id(node_id).is_ok(), "accepted nodeId '{}'", node_id);
  FUZZ_CHECK(validate_listen_address(listen).is_ok(), "accepted api.listen '{}'", listen);
  FUZZ_CHECK(lease >= kLeaseDurationMin && lease <= kLeaseDurationMax, "accepted lease.duration {}",
             format_duration(lease));
  FUZZ_CHECK(snapshots.keep >= 1 && snapshots.keep <= kSnapshotsKeepMax,
             "accepted snapshots.keep {}", snapshots.keep);
  FUZZ_CHECK(snapshots.interval >= Duration(0), "accepted a negative snapshots.interval");
}

void check_refusal(const Status& s) {
  FUZZ_CHECK(s.code() == Code::kInvalidArgument && !s.message().empty(), "{}", s.to_string());
}

}  // namespace

int config(const uint8_t* data, size_t size) {
  const std::string_view text = as_view(data, size);

  const std::string_view first_line = text.substr(0, text.find('\n'));
  auto d = parse_duration(first_line);
  if (d.is_ok()) {
    FUZZ_CHECK(d.value() > Duration(0), "accepted a duration <= 0: '{}'", first_line);
    auto again = parse_duration(format_duration(d.value()));
    FUZZ_CHECK(again.is_ok() && again.value() == d.value(), "'{}' -> '{}' does not round-trip",
               first_line, format_duration(d.value()));
  } else {
    check_refusal(d.status());
  }

  const NodeSettings defaults = NodeSettings::defaults(Subcommand::kDev);
  NodeSettings dev = defaults;
  if (Status s = apply_dev_override_yaml(text, "fuzz.yaml", dev); s.is_ok()) {
    check_common(dev.node_id, dev.listen, dev.lease_duration, dev.snapshots);
    FUZZ_CHECK(dev.standby_mode == StandbyMode::kCold, "dev accepted a hot standby");
  } else {
    check_refusal(s);
    FUZZ_CHECK(same(dev, defaults), "a refused override changed the config: {}", s.to_string());
  }

  auto local = load_local_config_yaml(text, "fuzz.yaml");
  if (local.is_ok()) {
    check_common(local->node_id, local->listen, local->lease_duration, local->snapshots);
    FUZZ_CHECK(!local->data_dir.empty(), "accepted an empty local.dataDir");
    FUZZ_CHECK(local->standby_mode == StandbyMode::kCold, "local accepted a hot standby");
  } else {
    check_refusal(local.status());
  }

  auto serve = load_serve_config_yaml(text, "fuzz.yaml");
  if (serve.is_ok()) {
    const NodeSettings& c = serve.value();
    check_common(c.node_id, c.listen, c.lease_duration, c.snapshots);
    FUZZ_CHECK(c.standby_mode == StandbyMode::kCold || c.standby_mode == StandbyMode::kHot,
               "accepted standby.mode {}", static_cast<int>(c.standby_mode));
    FUZZ_CHECK(c.object_store.type == ObjectStoreType::kS3 ||
                   c.object_store.type == ObjectStoreType::kFilesystem,
               "accepted objectStore.type {}", static_cast<int>(c.object_store.type));
    FUZZ_CHECK(!c.local_store_path.empty(), "accepted an empty localStore.path");
    for (const auto& digest : c.admin_token_sha256) {
      FUZZ_CHECK(digest.size() == 64, "accepted the token digest '{}'", digest);
    }
    (void)describe_serve_config(c);
  } else {
    check_refusal(serve.status());
  }
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(config)
