// A process that races others on one FilesystemObjectStore, for
// filesystem_store_test. Usage:
//
//   objstore_race_helper <root> <strict|processCrashSafe|relaxed> <mode> <key> <id> <count>
//   <go-file>
//
// Every process first waits (at most 20 s) until <go-file> exists, so that all
// of them start together. Modes:
//   create     put(kCreate) once; exit 0 if it won, 3 if PreconditionFailed.
//   increment  <count> times: get the decimal counter, replace it with counter+1
//              under the ETag just read, retrying on PreconditionFailed; after each
//              success a replace with the now stale ETag must fail. Exit 0.
//   write      <count> overwrites of the key with race_body(i) for varying i. Exit 0.
//   read       <count> gets; each must be NotFound or exactly some race_body(i). Exit 0.
//   slots      creates the log slots <key>/log/<0..count-1> in order (segments of 2 KiB, so
//              they roll under the race), printing to stdout each slot it won; then reads
//              every slot back, which must be a "slot <i> winner <id>" body. Exit 0.
// Any other outcome prints a line to stderr and exits 1 (2 for a broken rule).
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "common/durability.h"
#include "objstore/filesystem_store.h"
#include "race_body.h"

namespace {

constexpr int kExitLost = 3;
constexpr int kExitBroken = 2;
constexpr int kExitError = 1;
constexpr int kRetriesMax = 1'000'000;

int fail(int code, const std::string& what) {
  std::fprintf(stderr, "objstore_race_helper: %s\n", what.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dex;
  if (argc != 8) return fail(kExitError, "usage: root durability mode key id count go-file");
  const std::string root = argv[1];
  const auto durability = parse_durability(argv[2]);
  const std::string mode = argv[3];
  const std::string key = argv[4];
  const std::string id = argv[5];
  const int count = std::stoi(argv[6]);
  const std::string go_file = argv[7];
  if (!durability) return fail(kExitError, "bad durability");

  FilesystemStoreOptions options;
  if (mode == "slots") options.segment_bytes_max = 2048;
  auto opened = FilesystemObjectStore::open(root, *durability, options);
  if (!opened.is_ok()) return fail(kExitError, opened.status().to_string());
  ObjectStore& store = *opened.value();

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (::access(go_file.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) return fail(kExitError, "no go signal");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }

  if (mode == "create") {
    auto r = store.put(key, "winner " + id, PutCondition::create());
    if (r.is_ok()) return 0;
    if (r.status().is_precondition_failed()) return kExitLost;
    return fail(kExitError, r.status().to_string());
  }
  if (mode == "increment") {
    for (int i = 0; i < count; ++i) {
      for (int attempt = 0;; ++attempt) {
        if (attempt == kRetriesMax) return fail(kExitError, "too many retries");
        auto got = store.get(key);
        if (!got.is_ok()) return fail(kExitError, got.status().to_string());
        const long value = std::stol(got->body.substr(0, got->body.find(' ')));
        auto r = store.put(key, fmt::format("{} by {}", value + 1, id),
                           PutCondition::replace(got->etag));
        if (r.is_ok()) {
          // The counter only grows, so the ETag read above never comes back.
          auto stale = store.put(key, "stale write by " + id, PutCondition::replace(got->etag));
          if (!stale.status().is_precondition_failed()) {
            return fail(kExitBroken,
                        "a replace with a stale ETag did not fail: " + stale.status().to_string());
          }
          break;
        }
        if (!r.status().is_precondition_failed()) return fail(kExitError, r.status().to_string());
      }
    }
    return 0;
  }
  if (mode == "write") {
    const int first = std::stoi(id) * 1000;
    for (int i = 0; i < count; ++i) {
      auto r = store.put(key, objstore_test::race_body(first + i), PutCondition::overwrite());
      if (!r.is_ok()) return fail(kExitError, r.status().to_string());
    }
    return 0;
  }
  if (mode == "read") {
    for (int i = 0; i < count; ++i) {
      auto got = store.get(key);
      if (got.status().is_not_found()) continue;
      if (!got.is_ok()) return fail(kExitError, got.status().to_string());
      if (!objstore_test::is_race_body(got->body)) {
        return fail(kExitBroken,
                    fmt::format("torn or foreign object of {} bytes", got->body.size()));
      }
      if (got->etag != etag_of(got->body)) return fail(kExitBroken, "ETag does not match body");
    }
    return 0;
  }
  if (mode == "slots") {
    const auto slot_key = [&](int i) { return fmt::format("{}/log/{:020}", key, i); };
    for (int i = 0; i < count; ++i) {
      // A body of a few hundred bytes: a dozen slots fill a segment.
      auto r =
          store.put(slot_key(i), fmt::format("slot {} winner {} {}", i, id, std::string(150, 'x')),
                    PutCondition::create());
      if (r.is_ok()) {
        std::printf("%d\n", i);
      } else if (!r.status().is_precondition_failed()) {
        return fail(kExitError, r.status().to_string());
      }
    }
    std::fflush(stdout);
    for (int i = 0; i < count; ++i) {
      auto got = store.get(slot_key(i));
      if (!got.is_ok()) return fail(kExitBroken, slot_key(i) + ": " + got.status().to_string());
      if (!got->body.starts_with(fmt::format("slot {} winner ", i))) {
        return fail(kExitBroken, slot_key(i) + " holds " + got->body.substr(0, 40));
      }
    }
    return 0;
  }
  return fail(kExitError, "unknown mode " + mode);
}
