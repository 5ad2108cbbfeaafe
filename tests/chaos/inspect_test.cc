// dexcli inspect lease|log reading the object store that a serve config names
// (--config), and inspect log's --raw, --records and --from-slot: what the chaos
// checker reads the log with. dexcli runs as a process over a filesystem object
// store that the test writes directly (S3 is the same code path behind
// ObjectStore; the chaos harness runs it against MinIO).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../sdk/run_program.h"
#include "lease/lease_record.h"
#include "log/log_format.h"
#include "objstore/filesystem_store.h"

namespace dex {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::Ran;
using testing::run_program;

class InspectConfigTest : public ::testing::Test {
 protected:
  InspectConfigTest() {
    dir_ = fs::temp_directory_path() /
           ("dex-chaos-inspect-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "objects");
    auto store = FilesystemObjectStore::open(dir_ / "objects", Durability::kProcessCrashSafe);
    EXPECT_TRUE(store.is_ok());
    store_ = std::move(store).value();
  }
  ~InspectConfigTest() override { fs::remove_all(dir_); }

  Ran dexcli(const std::vector<std::string>& args) {
    return run_program("timeout 20", DEXCLI_PATH, args, dir_);
  }

  // A serve config whose object store is the filesystem store of this test.
  fs::path write_config(const std::string& node_id) {
    fs::path path = dir_ / "serve.yaml";
    std::ofstream(path) << "nodeId: " << node_id << "\nobjectStore:\n  type: filesystem\n  path: "
                        << (dir_ / "objects").string()
                        << "\nlocalStore:\n  path: " << (dir_ / "local").string() << "\n";
    return path;
  }

  void put_lease(const std::string& node_id, uint64_t epoch, const std::string& holder) {
    LeaseRecordValue record;
    record.node_id = NodeId(node_id);
    record.epoch = Epoch(epoch);
    record.holder_process_id = ProcessId(holder);
    record.duration = seconds(3);
    record.renewal_count = 4;
    record.write_id = "w";
    ASSERT_TRUE(store_
                    ->put(lease_key(NodeId(node_id)), encode_lease_record(record),
                          PutCondition::overwrite())
                    .is_ok());
  }

  // A batch at `slot`; an EpochStart when `epoch_start`, else one flow record:
  // a StartFlow of the chaos Flow type.
  void put_batch(const std::string& node_id, uint64_t slot, uint64_t epoch,
                 const std::string& writer, bool epoch_start, const std::string& flow_id = "") {
    proto::LogBatch batch;
    batch.set_node_id(node_id);
    batch.set_epoch(epoch);
    batch.set_slot(slot);
    batch.set_writer_process_id(writer);
    batch.set_write_id("write-" + std::to_string(slot));
    if (epoch_start) {
      auto* start = batch.add_records()->mutable_epoch_start();
      start->set_holder_process_id(writer);
      start->set_previous_end_slot(slot);
      start->set_at_unix_ms(1000 + static_cast<int64_t>(slot));
    } else {
      auto* start = batch.add_records()->mutable_flow()->mutable_start_flow();
      start->set_flow_id(flow_id);
      start->set_run_id("run-" + flow_id);
      start->set_flow_type("chaos");
      start->mutable_input()->set_data("in");
      start->set_at_unix_ms(2000);
    }
    ASSERT_TRUE(store_
                    ->put(slot_key(NodeId(node_id), Slot(slot)), encode_batch(batch),
                          PutCondition::create())
                    .is_ok());
  }

  fs::path dir_;
  std::unique_ptr<FilesystemObjectStore> store_;
};

TEST_F(InspectConfigTest, LeaseAndLogFromAServeConfigUseItsNodeId) {
  put_lease("node-c", 2, "proc-b");
  put_batch("node-c", 0, 1, "proc-a", true);
  put_batch("node-c", 1, 1, "proc-a", false, "f-1");
  put_batch("node-c", 2, 2, "proc-b", true);
  fs::path config = write_config("node-c");

  Ran lease = dexcli({"inspect", "lease", "--config", config.string()});
  ASSERT_EQ(lease.exit_code, 0) << lease.err;
  json l = json::parse(lease.out);
  EXPECT_EQ(l["nodeId"], "node-c");
  EXPECT_EQ(l["nodeEpoch"], "2");
  EXPECT_EQ(l["holderProcessId"], "proc-b");
  EXPECT_EQ(l["renewalCount"], 4);

  Ran log = dexcli({"inspect", "log", "--config", config.string()});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  json g = json::parse(log.out);
  EXPECT_EQ(g["nodeId"], "node-c");
  EXPECT_EQ(g["endSlot"], "3");
  ASSERT_EQ(g["batches"].size(), 3u);
  EXPECT_EQ(g["batches"][0]["kinds"], json::array({"epochStart"}));
  EXPECT_EQ(g["batches"][1]["kinds"], json::array({"flow.startFlow"}));
  EXPECT_FALSE(g["batches"][1].contains("recordDetails"));  // only with --records

  // --node-id still overrides the config's nodeId: another node has no lease here.
  Ran other = dexcli({"inspect", "lease", "--config", config.string(), "--node-id", "node-x"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("reading the lease"), std::string::npos) << other.err;
}

TEST_F(InspectConfigTest, RecordsPrintsEveryRecordInFull) {
  put_batch("node-c", 0, 1, "proc-a", true);
  put_batch("node-c", 1, 1, "proc-a", false, "f-7");
  Ran log = dexcli({"inspect", "log", "--config", write_config("node-c").string(), "--records"});
  ASSERT_EQ(log.exit_code, 0) << log.err;
  json g = json::parse(log.out);
  ASSERT_EQ(g["batches"].size(), 2u);
  EXPECT_EQ(g["batches"][0]["writeId"], "write-0");
  json es = g["batches"][0]["recordDetails"][0]["epochStart"];
  EXPECT_EQ(es["holderProcessId"], "proc-a");
  EXPECT_EQ(es["atUnixMs"], "1000");  // int64 as a string: protobuf's JSON mapping
  json sf = g["batches"][1]["recordDetails"][0]["flow"]["startFlow"];
  EXPECT_EQ(sf["flowId"], "f-7");
  EXPECT_EQ(sf["runId"], "run-f-7");
  EXPECT_EQ(sf["flowType"], "chaos");
  EXPECT_EQ(sf["atUnixMs"], "2000");
}

TEST_F(InspectConfigTest, RawShowsALowerEpochBatchThatTheReaderSkips) {
  // Epoch 2 started at slot 1; a fenced epoch-1 writer's batch at slot 2 is what
  // fencing must prevent. The reader skips it; --raw shows it.
  put_batch("node-c", 0, 1, "proc-a", true);
  put_batch("node-c", 1, 2, "proc-b", true);
  put_batch("node-c", 2, 1, "proc-a", false, "f-late");
  put_batch("node-c", 3, 2, "proc-b", false, "f-2");
  fs::path config = write_config("node-c");

  Ran plain = dexcli({"inspect", "log", "--config", config.string()});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  json p = json::parse(plain.out);
  EXPECT_EQ(p["skippedLowerEpochBatches"], 1);
  EXPECT_EQ(p["batches"].size(), 3u);

  Ran raw = dexcli({"inspect", "log", "--config", config.string(), "--raw"});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  json r = json::parse(raw.out);
  ASSERT_EQ(r["batches"].size(), 4u);
  EXPECT_EQ(r["batches"][2]["epoch"], "1");
  EXPECT_EQ(r["batches"][2]["writerProcessId"], "proc-a");
  EXPECT_EQ(r["missingSlots"], 0);

  Ran from = dexcli(
      {"inspect", "log", "--config", config.string(), "--raw", "--from-slot", "2", "--limit", "1"});
  ASSERT_EQ(from.exit_code, 0) << from.err;
  json f = json::parse(from.out);
  ASSERT_EQ(f["batches"].size(), 1u);
  EXPECT_EQ(f["batches"][0]["slot"], "2");
}

TEST_F(InspectConfigTest, ConfigAndDataDirTogetherAreAUsageError) {
  Ran ran = dexcli(
      {"inspect", "log", "--config", write_config("node-c").string(), "--data-dir", dir_.string()});
  EXPECT_EQ(ran.exit_code, 2) << ran.err;
  EXPECT_NE(ran.err.find("--data-dir"), std::string::npos) << ran.err;
}

TEST_F(InspectConfigTest, ABadConfigIsNamed) {
  fs::path bad = dir_ / "bad.yaml";
  std::ofstream(bad) << "nodeId: n\nobjectStore:\n  type: s3\n  bucket: b\n  bogus: 1\n";
  Ran ran = dexcli({"inspect", "lease", "--config", bad.string()});
  EXPECT_NE(ran.exit_code, 0);
  EXPECT_NE(ran.err.find("bogus"), std::string::npos) << ran.err;
}

TEST_F(InspectConfigTest, DataDirStillWorks) {
  // The dev layout: <data-dir>/objects, node "dev" by default.
  put_lease("dev", 1, "proc-d");
  Ran ran = dexcli({"inspect", "lease", "--data-dir", dir_.string()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(json::parse(ran.out)["holderProcessId"], "proc-d");
}

}  // namespace
}  // namespace dex
