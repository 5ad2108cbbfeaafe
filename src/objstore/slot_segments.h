// How the filesystem backend keeps the log's slot objects (keys "<dir>/log/<20 decimal
// digits>", docs/log.md "Slot objects"): appended to segment files instead of one file each.
//
// Why: a new file per batch costs a temp file, its fsync, a link and an fsync of the
// directory (two flushes and five metadata operations); an append to an open segment costs
// one write and one fdatasync. The log writer's throughput is its flush time (issue 30).
//
// The object semantics stay S3's (object_store.h), so the log above does not change: a
// create succeeds only while the key has no live object — also when two processes share
// the directory, without a lock a frozen process could hold:
//  - Every process appends records to the newest segment with O_APPEND (the kernel orders
//    concurrent appends; none interleave) and reads the segments in one global order:
//    segment number, then offset. A PUT of a live key, or anything after the segment's
//    SEAL, is void. So the first PUT of a key wins, exactly as link() lets one creator win.
//  - A writer learns whether its PUT won by reading the segment up to its own record after
//    the append ("append, then verify"); a PUT voided by a SEAL is appended again to the
//    next segment.
//  - remove() appends a TOMB record; a later PUT of the key lives again (S3: a delete, then
//    a create). A segment holding nothing live, sealed, with nothing older left, is deleted.
//  - A segment is rolled (SEAL, then the next one created by link(), complete with its
//    header) once it holds segment_bytes_max.
//  - Records are framed with a magic, a header CRC and a body CRC, each seeded with the
//    segment's random nonce, so that a torn append (a killed writer, a power loss) is skipped
//    and bytes inside a stored body (a user's payload) are never taken for a record.
// Segments live under <root>/.dex-segments/<dir>/<20-digit number>.seg, outside the key space.
// Every process keeps its own index of the live keys (bounded by the log's live slots).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/durability.h"
#include "common/status.h"
#include "objstore/object_store.h"

namespace dex {

// A key the segments hold: "<dir>/<20 decimal digits>" where dir's last segment is "log" and
// the number fits a uint64.
struct SlotObjectKey {
  std::string dir;
  uint64_t slot = 0;
};
std::optional<SlotObjectKey> parse_slot_object_key(std::string_view key);

class SlotSegments {
 public:
  static constexpr uint64_t kSegmentBytesDefault = 16u << 20;
  static constexpr std::string_view kDirName = ".dex-segments";

  SlotSegments(std::filesystem::path store_root, Durability durability, uint64_t segment_bytes_max,
               std::atomic<uint64_t>& fsyncs);
  ~SlotSegments();
  SlotSegments(const SlotSegments&) = delete;
  SlotSegments& operator=(const SlotSegments&) = delete;

  // The live object's body, or nullopt when the key has none here.
  StatusOr<std::optional<std::string>> get(const SlotObjectKey& key);
  // Appends `body` as the key's object unless the key is live (PreconditionFailed).
  Status create(const SlotObjectKey& key, std::string_view body);
  // Ends the key's object (a key without one is fine) and deletes the segments left empty.
  Status remove(const SlotObjectKey& key);

  struct Listed {
    std::string key;
    ListedObject object;
  };
  // The live keys that start with `prefix` and sort after `start_after`, ascending, at most
  // `max_keys` + 1 of them (so the caller can tell whether more follow).
  StatusOr<std::vector<Listed>> list(std::string_view prefix, std::string_view start_after,
                                     size_t max_keys);

 private:
  struct Segment;
  struct Dir;
  // What became of an appended record: applied, void as its key was live, or not seen
  // applied (after a SEAL, or its segment gone): void.
  enum class Outcome { kNone, kWon, kExists };

  StatusOr<Dir*> dir_of(const std::string& name);  // under mu_
  // Reads what the segments gained since the last refresh (Dir::appended learns the fate of
  // this instance's own appends).
  Status refresh(Dir& dir);
  Status parse_new(Dir& dir, Segment& segment);
  // The segment to append to: the newest, rolled first when sealed or full.
  StatusOr<Segment*> append_target(Dir& dir);
  Status new_segment(Dir& dir, uint64_t number);
  Status open_segment(Dir& dir, uint64_t number);
  Status append(Dir& dir, Segment& segment, uint8_t type, uint64_t slot, std::string_view body,
                uint64_t* offset, std::shared_ptr<const int>* fd);
  Status sync(int fd, const std::filesystem::path& path);
  Status sync_dir(const std::filesystem::path& path);
  Status delete_empty_segments(Dir& dir);
  // One try of a PUT (create) or a TOMB (remove): decided by the index, or appended, flushed
  // and verified. kNone: void after a SEAL, try again.
  StatusOr<Outcome> append_round(const SlotObjectKey& key, uint8_t type, std::string_view body);

  const std::filesystem::path root_;  // <store root>/.dex-segments
  const Durability durability_;
  const uint64_t segment_bytes_max_;
  std::atomic<uint64_t>& fsyncs_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Dir>> dirs_;  // guarded by mu_
};

}  // namespace dex
