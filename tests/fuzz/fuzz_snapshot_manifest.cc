// Snapshot manifests (src/snapshot/snapshot.h): whatever bytes a manifest key
// holds, decode_snapshot_manifest answers a checked manifest or Corruption. What
// it accepts is safe to restore from: every file name is plain (it cannot escape
// the restore directory), named once, with a 64-digit sha256 and the
// content-addressed key; node and slot match the key. Accepted manifests
// round-trip. The key line goes through parse_snapshot_manifest_key, which must
// accept exactly the keys snapshot_manifest_key makes.
//
// Input: mode byte | key line '\n' | object (mode bit 0) or SnapshotManifest payload.
#include <set>

#include "common/framing.h"
#include "fuzz_targets.h"
#include "fuzz_util.h"
#include "snapshot/snapshot.h"

namespace dex::fuzz {

int snapshot_manifest(const uint8_t* data, size_t size) {
  const ProtobufQuiet quiet;
  const NodeId node("n1");
  const BinaryInput in = split_input(data, size, /*with_key=*/true);

  auto slot = parse_snapshot_manifest_key(node, in.key);
  if (slot.is_ok()) {
    FUZZ_CHECK(snapshot_manifest_key(node, slot.value()) == in.key, "key '{}' parsed as slot {}",
               in.key, slot->value);
  } else {
    FUZZ_CHECK(slot.status().code() == Code::kInvalidArgument, "{}", slot.status().to_string());
  }

  const std::string object =
      in.raw ? std::string(in.body) : frame(kSnapshotManifestMagic, in.body);
  auto manifest = decode_snapshot_manifest(node, in.key, object);
  if (!manifest.is_ok()) {
    FUZZ_CHECK(manifest.status().is_corruption(), "{}", manifest.status().to_string());
    return 0;
  }
  const proto::SnapshotManifest& m = manifest.value();
  FUZZ_CHECK(slot.is_ok() && m.slot() == slot->value && m.node_id() == node.value,
             "accepted a manifest of slot {} node '{}' under key '{}'", m.slot(), m.node_id(),
             in.key);
  FUZZ_CHECK(m.epoch() > 0 && m.files_size() > 0, "accepted epoch {} with {} files", m.epoch(),
             m.files_size());
  std::set<std::string> names;
  for (const auto& f : m.files()) {
    const std::string& n = f.name();
    FUZZ_CHECK(!n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
                   n.find('\\') == std::string::npos && n.find('\0') == std::string::npos,
               "accepted the file name '{}'", n);
    FUZZ_CHECK(names.insert(n).second, "accepted '{}' twice", n);
    FUZZ_CHECK(f.sha256().size() == 64 && f.key() == snapshot_file_prefix(node) + f.sha256(),
               "accepted file '{}' with key '{}', sha256 '{}'", n, f.key(), f.sha256());
  }

  const std::string encoded = encode_snapshot_manifest(m);
  auto again = decode_snapshot_manifest(node, in.key, encoded);
  FUZZ_CHECK(again.is_ok(), "a re-encoded manifest does not decode: {}",
             again.status().to_string());
  FUZZ_CHECK(encode_snapshot_manifest(again.value()) == encoded,
             "decode/encode is not a fixed point");
  return 0;
}

}  // namespace dex::fuzz

DEX_FUZZ_ENTRY(snapshot_manifest)
