// Replays every committed fuzz input through its target in the normal build:
// tests/fuzz/corpus/<target>/* (the seeds) and tests/fuzz/regressions/<target>/*
// (inputs that once crashed a decoder). A target aborts on a broken invariant,
// so a failing input kills its test; the last "replay" line names it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "corpus_seeds.h"
#include "fuzz_targets.h"

namespace dex::fuzz {
namespace {

namespace fs = std::filesystem;
using TargetFn = int (*)(const uint8_t*, size_t);

const std::map<std::string, TargetFn>& targets() {
  static const std::map<std::string, TargetFn> all = {
      {"log_batch", &log_batch},
      {"log_reader", &log_reader},
      {"lease_record", &lease_record},
      {"snapshot_manifest", &snapshot_manifest},
      {"config", &config},
      {"s3_xml", &s3_xml},
      {"flow_rules", &flow_rules},
      {"search_query", &search_query},
      {"sync_machine", &sync_machine},
  };
  return all;
}

const fs::path kFuzzDir(DEX_FUZZ_DIR);

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void run(TargetFn fn, const std::string& bytes) {
  EXPECT_EQ(fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
}

// Returns how many files were replayed from `kind` (corpus or regressions).
size_t replay(const std::string& target, const char* kind) {
  size_t n = 0;
  for (const auto& path : files_in(kFuzzDir / kind / target)) {
    std::fprintf(stderr, "replay %s\n", path.c_str());
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    run(targets().at(target), bytes);
    ++n;
  }
  return n;
}

void replay_target(const std::string& target) {
  EXPECT_GT(replay(target, "corpus"), 0u) << "no seeds in corpus/" << target;
  replay(target, "regressions");
  for (const auto& seed : corpus_seeds()) {
    if (seed.target == target) run(targets().at(target), seed.bytes);
  }
}

TEST(Replay, LogBatch) { replay_target("log_batch"); }
TEST(Replay, LogReader) { replay_target("log_reader"); }
TEST(Replay, LeaseRecord) { replay_target("lease_record"); }
TEST(Replay, SnapshotManifest) { replay_target("snapshot_manifest"); }
TEST(Replay, Config) { replay_target("config"); }
TEST(Replay, S3Xml) { replay_target("s3_xml"); }
TEST(Replay, FlowRules) { replay_target("flow_rules"); }
TEST(Replay, SearchQuery) { replay_target("search_query"); }
TEST(Replay, SyncMachine) { replay_target("sync_machine"); }

// A folder without a target would be silently skipped; a seed without a target
// would never run.
TEST(Replay, EveryFolderAndSeedHasATarget) {
  for (const char* kind : {"corpus", "regressions"}) {
    if (!fs::is_directory(kFuzzDir / kind)) continue;
    for (const auto& e : fs::directory_iterator(kFuzzDir / kind)) {
      EXPECT_TRUE(targets().contains(e.path().filename().string())) << e.path();
    }
  }
  for (const auto& seed : corpus_seeds())
    EXPECT_TRUE(targets().contains(seed.target)) << seed.target;
}

// The committed corpus holds every generated seed (fuzz_make_corpus was run).
TEST(Replay, CommittedCorpusHasEveryGeneratedSeed) {
  for (const auto& seed : corpus_seeds()) {
    const fs::path path = kFuzzDir / "corpus" / seed.target / seed.name;
    EXPECT_TRUE(fs::exists(path)) << path << " is missing: run fuzz_make_corpus tests/fuzz/corpus";
  }
}

}  // namespace
}  // namespace dex::fuzz
