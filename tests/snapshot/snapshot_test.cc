// Snapshots in object storage (docs/snapshots.md): the manifest codec, upload
// once per file, trim, download checks, the trigger policy, and the
// Snapshotter's log collection behind the oldest kept snapshot.
#include "snapshot/snapshot.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/framing.h"
#include "log/log_format.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

namespace fs = std::filesystem;
const NodeId kNode("n1");

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("dex-snapshot-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path sub(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

void write(const fs::path& p, const std::string& body) {
  std::ofstream(p, std::ios::binary) << body;
}
std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A checkpoint-like directory: two immutable files and a mutable one.
fs::path make_checkpoint(const TempDir& dir, const std::string& name, const std::string& manifest) {
  fs::path d = dir.sub(name);
  fs::create_directories(d);
  write(d / "000007.sst", "sst seven");
  write(d / "000009.sst", "sst nine");
  write(d / "MANIFEST-000005", manifest);
  write(d / "CURRENT", "MANIFEST-000005\n");
  return d;
}

SnapshotUploader::Options uploader_options() { return {kNode, ProcessId("p1"), Epoch(3), {}}; }

size_t count_under(MemoryObjectStore& store, const std::string& prefix) {
  return list_all(store, prefix).value().size();
}

TEST(SnapshotFormat, KeysAndManifestRoundTrip) {
  EXPECT_EQ(snapshot_manifest_key(kNode, Slot(42)),
            "nodes/n1/snapshots/manifests/00000000000000000042");
  EXPECT_EQ(parse_snapshot_manifest_key(kNode, snapshot_manifest_key(kNode, Slot(42))).value(),
            Slot(42));
  EXPECT_EQ(parse_snapshot_manifest_key(kNode, "nodes/n1/snapshots/manifests/42").status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(parse_snapshot_manifest_key(kNode, "nodes/n2/snapshots/manifests/00000000000000000042")
                .status()
                .code(),
            Code::kInvalidArgument);

  proto::SnapshotManifest m;
  m.set_node_id("n1");
  m.set_slot(42);
  m.set_epoch(3);
  auto* f = m.add_files();
  f->set_name("CURRENT");
  f->set_sha256(std::string(64, 'a'));
  f->set_key(snapshot_file_prefix(kNode) + f->sha256());
  f->set_size(16);
  const std::string key = snapshot_manifest_key(kNode, Slot(42));
  auto back = decode_snapshot_manifest(kNode, key, encode_snapshot_manifest(m));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->files(0).name(), "CURRENT");
}

TEST(SnapshotFormat, BadManifestsAreCorruptionNamingTheKeyAndTheReason) {
  const std::string key = snapshot_manifest_key(kNode, Slot(42));
  auto good = [] {
    proto::SnapshotManifest m;
    m.set_node_id("n1");
    m.set_slot(42);
    m.set_epoch(3);
    auto* f = m.add_files();
    f->set_name("000007.sst");
    f->set_sha256(std::string(64, 'b'));
    f->set_key(snapshot_file_prefix(kNode) + f->sha256());
    return m;
  };
  struct Case {
    const char* why;
    std::function<void(proto::SnapshotManifest&)> spoil;
  };
  std::vector<Case> cases = {
      {"names node", [](auto& m) { m.set_node_id("n2"); }},
      {"its key slot", [](auto& m) { m.set_slot(41); }},
      {"epoch 0", [](auto& m) { m.set_epoch(0); }},
      {"0 files", [](auto& m) { m.clear_files(); }},
      {"bad file name", [](auto& m) { m.mutable_files(0)->set_name("../../etc/passwd"); }},
      {"bad file name", [](auto& m) { m.mutable_files(0)->set_name("a/b"); }},
      {"bad sha256", [](auto& m) { m.mutable_files(0)->set_sha256("xyz"); }},
      {"has key", [](auto& m) { m.mutable_files(0)->set_key("nodes/n1/log/0"); }},
      {"named twice", [](auto& m) { *m.add_files() = m.files(0); }},
  };
  for (const auto& c : cases) {
    auto m = good();
    c.spoil(m);
    auto r = decode_snapshot_manifest(kNode, key, encode_snapshot_manifest(m));
    ASSERT_FALSE(r.is_ok()) << c.why;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << c.why;
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(key), std::string::npos) << r.status().message();
  }
  std::string bytes = encode_snapshot_manifest(good());
  bytes[bytes.size() - 1] ^= 1;  // a flipped bit fails the CRC
  EXPECT_EQ(decode_snapshot_manifest(kNode, key, bytes).status().code(), Code::kCorruption);
  EXPECT_EQ(decode_snapshot_manifest(kNode, key, "junk").status().code(), Code::kCorruption);
  EXPECT_EQ(decode_snapshot_manifest(kNode, key, frame(kLogBatchMagic, "x")).status().code(),
            Code::kCorruption);
}

TEST(SnapshotUpload, EachFileIsUploadedOnceAndTheManifestLast) {
  TempDir dir;
  MemoryObjectStore store;
  SnapshotUploader up(store, uploader_options(), [] { return true; });
  auto first = up.upload(make_checkpoint(dir, "c1", "manifest v1"), Slot(10), 1000);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(first->files, 4u);
  EXPECT_EQ(first->uploaded_files, 4u);
  EXPECT_EQ(list_snapshots(store, kNode).value(), std::vector<Slot>{Slot(10)});

  // The next checkpoint shares both SSTs and changes the MANIFEST only.
  auto second = up.upload(make_checkpoint(dir, "c2", "manifest v2"), Slot(20), 2000);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->files, 4u);
  EXPECT_EQ(second->uploaded_files, 1u);
  EXPECT_EQ(second->uploaded_bytes, std::string("manifest v2").size());
  EXPECT_EQ(count_under(store, snapshot_file_prefix(kNode)), 5u);

  // A second upload of the same slot finds its manifest there and keeps it.
  auto again = up.upload(make_checkpoint(dir, "c3", "manifest v2"), Slot(20), 3000);
  ASSERT_TRUE(again.is_ok());
  EXPECT_TRUE(again->manifest_existed);
  EXPECT_EQ(again->uploaded_files, 0u);
}

TEST(SnapshotUpload, WritesNothingWithoutAValidLease) {
  TempDir dir;
  MemoryObjectStore store;
  SnapshotUploader up(store, uploader_options(), [] { return false; });
  auto r = up.upload(make_checkpoint(dir, "c1", "m"), Slot(10), 1000);
  EXPECT_EQ(r.status().code(), Code::kStopped);
  EXPECT_EQ(count_under(store, "nodes/"), 0u);
}

TEST(SnapshotDownload, RestoresTheFilesAndChecksThem) {
  TempDir dir;
  MemoryObjectStore store;
  SnapshotUploader up(store, uploader_options(), [] { return true; });
  ASSERT_TRUE(up.upload(make_checkpoint(dir, "c1", "manifest v1"), Slot(10), 1000).is_ok());
  auto m = download_snapshot(store, kNode, Slot(10), dir.sub("restored"));
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(read(dir.sub("restored") / "000009.sst"), "sst nine");
  EXPECT_EQ(read(dir.sub("restored") / "CURRENT"), "MANIFEST-000005\n");
  // The target must not exist.
  EXPECT_EQ(download_snapshot(store, kNode, Slot(10), dir.sub("restored")).status().code(),
            Code::kInvalidArgument);

  // A file whose bytes differ from its manifest is Corruption; nothing is left behind.
  std::string key;
  for (const auto& f : m->files()) {
    if (f.name() == "000007.sst") key = f.key();
  }
  ASSERT_TRUE(store.put(key, "tampered", PutCondition::overwrite()).is_ok());
  auto bad = download_snapshot(store, kNode, Slot(10), dir.sub("bad"));
  EXPECT_EQ(bad.status().code(), Code::kCorruption);
  EXPECT_NE(bad.status().message().find("000007.sst"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.sub("bad")));
  // A missing file is NotFound (a newer holder trimmed it): the caller falls back.
  ASSERT_TRUE(store.remove(key).is_ok());
  EXPECT_EQ(download_snapshot(store, kNode, Slot(10), dir.sub("gone")).status().code(),
            Code::kNotFound);
  EXPECT_FALSE(fs::exists(dir.sub("gone")));
  EXPECT_EQ(download_snapshot(store, kNode, Slot(11), dir.sub("none")).status().code(),
            Code::kNotFound);
}

TEST(SnapshotTrim, KeepsTheNewestAndTheFilesTheyName) {
  TempDir dir;
  MemoryObjectStore store;
  SnapshotUploader up(store, uploader_options(), [] { return true; });
  for (int i = 1; i <= 4; ++i) {
    fs::path d = dir.sub("c" + std::to_string(i));
    fs::create_directories(d);
    write(d / "CURRENT", "MANIFEST-" + std::to_string(i));
    write(d / "shared.sst", "shared");
    ASSERT_TRUE(up.upload(d, Slot(10 * i), i).is_ok());
  }
  EXPECT_EQ(count_under(store, snapshot_file_prefix(kNode)), 5u);
  EXPECT_EQ(trim_snapshots(store, kNode, 0, [] { return true; }).status().code(),
            Code::kInvalidArgument);
  auto denied = trim_snapshots(store, kNode, 2, [] { return false; });
  EXPECT_EQ(denied.status().code(), Code::kStopped);
  EXPECT_EQ(list_snapshots(store, kNode)->size(), 4u);

  auto t = trim_snapshots(store, kNode, 2, [] { return true; });
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->oldest_kept, Slot(30));
  EXPECT_EQ(t->manifests_deleted, 2u);
  EXPECT_EQ(t->files_deleted, 2u);
  EXPECT_EQ(list_snapshots(store, kNode).value(), (std::vector<Slot>{Slot(30), Slot(40)}));
  EXPECT_EQ(count_under(store, snapshot_file_prefix(kNode)), 3u);
  EXPECT_TRUE(download_snapshot(store, kNode, Slot(30), dir.sub("r30")).is_ok());
  EXPECT_TRUE(download_snapshot(store, kNode, Slot(40), dir.sub("r40")).is_ok());
}

TEST(SnapshotPolicyTest, DueOnRecordsOrTimeOnlyWhenSomethingChanged) {
  SnapshotPolicy p;
  p.interval = std::chrono::minutes(10);
  p.every_records = 1000;
  EXPECT_FALSE(snapshot_due(p, 0, std::chrono::hours(5)));  // nothing new
  EXPECT_FALSE(snapshot_due(p, 999, std::chrono::minutes(9)));
  EXPECT_TRUE(snapshot_due(p, 1000, seconds(0)));
  EXPECT_TRUE(snapshot_due(p, 1, std::chrono::minutes(10)));
  p.interval = Duration(0);
  EXPECT_FALSE(snapshot_due(p, 1, std::chrono::hours(5)));
  p.every_records = 0;
  EXPECT_FALSE(p.enabled());
  EXPECT_FALSE(snapshot_due(p, 1'000'000, std::chrono::hours(5)));
}

// The Snapshotter with a fake checkpoint source over a fabricated log.
class SnapshotterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (uint64_t s = 0; s < 1500; ++s) {
      ASSERT_TRUE(store_.put(slot_key(kNode, Slot(s)), "x", PutCondition::create()).is_ok());
    }
  }
  Snapshotter::Source source() {
    Snapshotter::Source src;
    src.records_applied = [this] { return records_.load(); };
    src.checkpoint = [this](const fs::path& d) -> StatusOr<std::optional<Slot>> {
      fs::create_directories(d);
      write(d / "CURRENT", "state at " + std::to_string(slot_));
      return std::optional<Slot>(Slot(slot_));
    };
    src.gc_guard = [this] {
      GcGuard g;
      g.log_end = Slot(1500);
      g.epoch_start_slot = Slot(epoch_start_);
      g.epoch_settled = settled_;
      g.lease_valid = [this] { return lease_.load(); };
      return g;
    };
    src.now_unix_ms = [] { return int64_t{1}; };
    return src;
  }
  Snapshotter::Options options() {
    Snapshotter::Options o;
    o.node_id = kNode;
    o.process_id = ProcessId("p1");
    o.epoch = Epoch(2);
    o.policy.interval = seconds(60);
    o.policy.every_records = 100;
    o.policy.keep = 1;
    o.scratch_dir = dir_.sub("scratch");
    o.poll = milliseconds(10);
    return o;
  }
  MemoryObjectStore store_;
  ManualClock clock_;
  TempDir dir_;
  std::atomic<uint64_t> records_{0};
  std::atomic<bool> lease_{true};
  uint64_t slot_ = 400;
  uint64_t epoch_start_ = 300;
  bool settled_ = false;
};

TEST_F(SnapshotterTest, CollectsTheLogBehindTheSnapshotButNotPastTheEpochStartOrTheMargin) {
  Snapshotter snap(store_, clock_, options(), source());
  auto info = snap.snapshot_now();
  ASSERT_TRUE(info.is_ok()) << info.status().to_string();
  // Behind the snapshot at 400 is 401, but the EpochStart at 300 stays.
  EXPECT_EQ(find_log_bounds(store_, kNode)->first, Slot(300));
  settled_ = true;
  slot_ = 900;
  Snapshotter settled(store_, clock_, options(), source());
  ASSERT_TRUE(settled.snapshot_now().is_ok());
  // Behind 901, but 1000 slots stay below the log end of 1500.
  EXPECT_EQ(find_log_bounds(store_, kNode)->first, Slot(500));
  EXPECT_EQ(list_snapshots(store_, kNode).value(), std::vector<Slot>{Slot(900)});
  EXPECT_EQ(settled.stats().log_slots_collected, 200u);
}

TEST_F(SnapshotterTest, TriggersOnRecordCountAndOnTimeAndRetriesAfterAFailure) {
  Snapshotter snap(store_, clock_, options(), source());
  snap.start();
  // The thread checks its triggers every `poll` of the ManualClock.
  auto tick = [&] {
    clock_.advance(milliseconds(10));
    std::this_thread::sleep_for(milliseconds(50));
  };
  auto wait_for = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(milliseconds(5));
    return done();
  };
  tick();
  EXPECT_EQ(snap.stats().snapshots, 0u);  // nothing applied yet
  records_ = 100;                         // the record-count trigger
  tick();
  EXPECT_TRUE(wait_for([&] { return snap.stats().snapshots == 1; }));
  records_ = 101;
  slot_ = 450;
  tick();
  EXPECT_EQ(snap.stats().snapshots, 1u);  // one record, and the interval has not passed
  clock_.advance(seconds(60));            // the time trigger
  EXPECT_TRUE(wait_for([&] { return snap.stats().snapshots == 2; }));
  EXPECT_EQ(snap.stats().last_slot, Slot(450));

  lease_ = false;  // the next one fails and is retried after retry_after
  records_ = 500;
  slot_ = 480;
  tick();
  EXPECT_TRUE(wait_for([&] { return snap.stats().failures == 1; }));
  lease_ = true;
  tick();
  tick();
  EXPECT_EQ(snap.stats().snapshots, 2u);  // still waiting out retry_after
  clock_.advance(seconds(10));
  EXPECT_TRUE(wait_for([&] { return snap.stats().snapshots == 3; }));
  EXPECT_EQ(snap.stats().last_slot, Slot(480));
  snap.stop();
}

}  // namespace
}  // namespace dex
