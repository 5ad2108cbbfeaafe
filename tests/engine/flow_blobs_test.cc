// Large values through the whole engine (docs/engine.md, "Large values"):
// values over the threshold are blobs under the node's prefix before their
// record is appended, the log holds references, Workers and clients see the
// values; a value over the maximum is refused naming the limit; a missing
// blob fails the attempt naming its key; a new process replaying the log
// (a takeover) reads the same values. MemoryObjectStore + LogWriter + Engine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "blob/blob_store.h"
#include "common/digest.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "log/log_reader.h"
#include "objstore/memory_store.h"

namespace dex {
namespace {

using namespace dex::testing;
using ::testing::HasSubstr;

constexpr uint64_t kThreshold = 1024;
constexpr uint64_t kMax = 64 * 1024;

void small_values(EngineOptions& eo) {
  eo.values.threshold_bytes = kThreshold;
  eo.values.value_bytes_max = kMax;
  eo.values.cache_bytes_max = 0;  // every read reaches the object store
  eo.values.message_bytes_max = 1 << 20;
}

// Order with an Attribute "doc" (string) that every Step reads.
flow::FlowDeclaration doc_declaration() {
  flow::FlowDeclaration d = order_declaration();
  auto* doc = d.add_attributes();
  doc->set_key("doc");
  doc->set_type(flow::ATTRIBUTE_STRING);
  for (auto& s : *d.mutable_steps()) s.add_attribute_reads("doc");
  return d;
}

std::string value(size_t n, char c) { return std::string(n, c); }

// Every Payload and AttributeValue of the flow records in the log, as
// "inline:<size>" or "blob:<key>".
std::vector<std::string> logged_values(ObjectStore& store) {
  std::vector<std::string> out;
  LogReader reader(store, kNode, kFirstSlot);
  Status read = reader.read_to_end([&](const LogEntry& entry) {
    for (const auto& r : entry.batch.records()) {
      if (!r.has_flow()) continue;
      const auto& f = r.flow();
      if (f.has_start_flow()) {
        const auto& in = f.start_flow().input();
        out.push_back(in.has_blob() ? "blob:" + in.blob().key()
                                    : "inline:" + std::to_string(in.data().size()));
      }
      if (f.has_method_result()) {
        for (const auto& w : f.method_result().attribute_writes())
          out.push_back(w.value().has_blob()
                            ? "blob:" + w.value().blob().key()
                            : "inline:" + std::to_string(w.value().string_value().size()));
      }
    }
    return Status::ok();
  });
  EXPECT_TRUE(read.is_ok()) << read.to_string();
  return out;
}

// The inner store, but a GET of a blob waits while the gate is closed (a slow
// object store), up to 20 s.
class GatedBlobStore final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void open_gate() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int blocked() const { return blocked_; }
  StatusOr<ObjectData> get(std::string_view key, const RequestOptions& options = {}) override {
    if (key.find("/blobs/") != std::string_view::npos) {
      std::unique_lock<std::mutex> lock(mu_);
      ++blocked_;
      cv_.wait_for(lock, std::chrono::seconds(20), [&] { return open_; });
    }
    return inner_.get(key, options);
  }
  std::string describe() const override { return "gated " + inner_.describe(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  std::atomic<int> blocked_{0};
};

class FlowBlobsTest : public EngineProcessTest {
 protected:
  std::unique_ptr<EngineProcess> open(ObjectStore& store, uint64_t epoch, const std::string& dir) {
    auto p = std::make_unique<EngineProcess>();
    open_process(*p, store, epoch, dir_.sub(dir), small_values);
    return p;
  }
  // Declares the Flow type through a Worker that leaves at once: starts are
  // accepted, and their tasks wait for the next Worker.
  static void declare(Engine& e) {
    e.disconnect_worker(connect_flows(e, std::make_shared<FlowWorker>(), "w0", doc_declaration()));
  }
};

TEST_F(FlowBlobsTest, LongValuesAreBlobsInTheLogAndWholeForWorkersAndClients) {
  MemoryObjectStore store;
  auto p = open(store, 1, "local1");
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  auto worker = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, worker, "w1", doc_declaration());
  const std::string input = value(5000, 'i');
  start(e, "order/1", input);

  auto task = worker->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->input().data(), input);  // whole for the Worker
  EXPECT_FALSE(task->input().has_blob());

  // The Execute writes a long Attribute and completes with a long output.
  flow::FlowTaskResult r;
  r.set_task_id(task->task_id());
  r.mutable_decision()->mutable_graceful_complete()->set_data(value(3000, 'o'));
  auto* write = r.add_attribute_writes();
  write->set_key("doc");
  write->mutable_value()->set_string_value(value(2000, 'd'));
  ASSERT_TRUE(answer(e, w, r).accepted());

  const auto done = wait_closed(e, "order/1");
  ASSERT_EQ(done.status(), flow::FLOW_COMPLETED);
  ASSERT_EQ(done.outputs_size(), 1);
  EXPECT_EQ(done.outputs(0).output().data(), value(3000, 'o'));
  EXPECT_EQ(done.input().data(), input);
  flow::GetAttributesRequest get;
  get.mutable_flow()->set_flow_id("order/1");
  auto attrs = e.get_attributes(get);
  ASSERT_TRUE(attrs.is_ok()) << attrs.status().to_string();
  ASSERT_EQ(attrs->attributes_size(), 1);
  EXPECT_EQ(attrs->attributes(0).value().string_value(), value(2000, 'd'));
  EXPECT_FALSE(attrs->attributes(0).value().has_blob());
  // WaitForAttribute compares with the stored reference.
  flow::WaitForAttributeRequest wait;
  *wait.mutable_flow() = get.flow();
  wait.set_key("doc");
  wait.mutable_value()->set_string_value(value(2000, 'd'));
  wait.set_timeout_ms(1);
  auto matched = e.wait_for_attribute(wait, nullptr);
  ASSERT_TRUE(matched.is_ok()) << matched.status().to_string();
  EXPECT_TRUE(matched->matched());
  EXPECT_EQ(matched->current().string_value(), value(2000, 'd'));
  // The history shows the values too.
  flow::GetHistoryEventsRequest h;
  *h.mutable_flow() = get.flow();
  h.set_from_start(true);
  auto history = e.history(h);
  ASSERT_TRUE(history.is_ok()) << history.status().to_string();
  bool saw_output = false;
  for (const auto& ev : history->events()) {
    if (ev.decision().graceful_complete().data() == value(3000, 'o')) saw_output = true;
  }
  EXPECT_TRUE(saw_output) << history->ShortDebugString().substr(0, 2000);

  // The log holds references to blobs of the flow, written before it.
  const std::string prefix = BlobStore(store, clock_, kNode, {}).flow_prefix("order/1");
  EXPECT_EQ(logged_values(store),
            (std::vector<std::string>{"blob:" + prefix + sha256_hex(input),
                                      "blob:" + prefix + sha256_hex(value(2000, 'd'))}));
  auto keys = list_all(store, prefix);
  ASSERT_TRUE(keys.is_ok());
  EXPECT_EQ(keys->size(), 3u);  // input, output, Attribute
}

TEST_F(FlowBlobsTest, ASlowBlobReadHoldsUpNoOtherTask) {
  MemoryObjectStore memory;
  GatedBlobStore store(memory);
  auto p = open(store, 1, "local1");
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  auto worker = std::make_shared<FlowWorker>();
  connect_flows(e, worker, "w1", doc_declaration());
  const std::string input = value(5000, 'i');
  start(e, "big", input);  // its task's input is a blob, and reading it waits
  ASSERT_TRUE(eventually([&] { return store.blocked() > 0; }));
  start(e, "small", "s");
  auto first = worker->next(std::chrono::milliseconds(5000));
  ASSERT_TRUE(first) << "the short task waited for the other's blob";
  EXPECT_EQ(first->flow_id(), "small");
  EXPECT_EQ(first->input().data(), "s");
  store.open_gate();
  auto second = worker->next(std::chrono::milliseconds(5000));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->flow_id(), "big");
  EXPECT_EQ(second->input().data(), input);
  EXPECT_FALSE(second->input().has_blob());
}

TEST_F(FlowBlobsTest, ShortValuesStayInTheLog) {
  MemoryObjectStore store;
  auto p = open(store, 1, "local1");
  ASSERT_TRUE(p->engine);
  declare(*p->engine);
  start(*p->engine, "f", value(kThreshold, 's'));
  EXPECT_EQ(logged_values(store), std::vector<std::string>{"inline:1024"});
  auto keys = list_all(store, BlobStore::node_prefix(kNode));
  ASSERT_TRUE(keys.is_ok());
  EXPECT_TRUE(keys->empty());
}

TEST_F(FlowBlobsTest, AValueOverTheMaximumIsRefusedNamingTheLimit) {
  MemoryObjectStore store;
  auto p = open(store, 1, "local1");
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  auto worker = std::make_shared<FlowWorker>();
  auto w = connect_flows(e, worker, "w1", doc_declaration());
  flow::StartFlowRequest big;
  big.set_flow_id("big");
  big.set_flow_type("Order");
  big.mutable_input()->set_data(value(kMax + 1, 'x'));
  auto refused = e.start_flow(big);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("input is 65537 bytes; the limit is 65536 bytes (64 KiB"));
  auto d = e.describe_flow(flow_ref("big"));
  EXPECT_EQ(d.status().code(), Code::kNotFound);  // nothing started

  // A Worker's result with a value over the maximum: the attempt fails.
  start(e, "f", "in");
  auto task = worker->next();
  ASSERT_TRUE(task);
  flow::FlowTaskResult r;
  r.set_task_id(task->task_id());
  r.mutable_decision()->mutable_graceful_complete()->set_data(value(kMax + 1, 'o'));
  const ResultAck ack = answer(e, w, r);
  EXPECT_FALSE(ack.accepted());
  EXPECT_THAT(ack.reason(), HasSubstr("decision.gracefulComplete is 65537 bytes"));
  auto retry = worker->next(std::chrono::milliseconds(100));
  EXPECT_FALSE(retry);  // in its backoff
  auto step = active_step(e, "f", "Start-1");
  ASSERT_TRUE(step);
  EXPECT_EQ(step->last_failure().outcome(), flow::ATTEMPT_FAILED);
  EXPECT_THAT(step->last_failure().error(), HasSubstr("invalid result: decision.gracefulComplete"));
}

TEST_F(FlowBlobsTest, AMissingBlobFailsTheAttemptAndTheReadNamingItsKey) {
  MemoryObjectStore store;
  auto p = open(store, 1, "local1");
  ASSERT_TRUE(p->engine);
  Engine& e = *p->engine;
  const std::string input = value(2000, 'i');
  // One attempt: its failure is final and shows in the history.
  flow::FlowDeclaration once = doc_declaration();
  execute_options(once, "Start").mutable_retry()->set_maximum_attempts(1);
  e.disconnect_worker(connect_flows(e, std::make_shared<FlowWorker>(), "w0", once));
  start(e, "f", input);  // no Worker: the task is queued
  const std::string key = BlobStore(store, clock_, kNode, {}).flow_prefix("f") + sha256_hex(input);
  ASSERT_TRUE(store.remove(key).is_ok());
  auto d = e.describe_flow(flow_ref("f"));
  ASSERT_FALSE(d.is_ok());
  EXPECT_TRUE(d.status().is_corruption()) << d.status().to_string();
  EXPECT_THAT(d.status().message(), HasSubstr(key));

  auto worker = std::make_shared<FlowWorker>();
  connect_flows(e, worker, "w1", once);
  EXPECT_FALSE(worker->next(std::chrono::milliseconds(300)));  // never sent with a reference
  // The run cannot be described (its input is gone); its history tells why
  // the attempt failed.
  flow::GetHistoryEventsRequest h;
  h.mutable_flow()->set_flow_id("f");
  h.set_from_start(true);
  std::string error;
  ASSERT_TRUE(eventually([&] {
    auto events = e.history(h);
    if (!events.is_ok()) return false;
    for (const auto& ev : events->events())
      if (ev.kind() == flow::EXECUTE_FAILED) error = ev.error();
    return !error.empty();
  }));
  EXPECT_THAT(error, HasSubstr("could not put the task's values back in place"));
  EXPECT_THAT(error, HasSubstr(key));
}

TEST_F(FlowBlobsTest, ANewProcessReplayingTheLogReadsTheSameValues) {
  MemoryObjectStore store;
  auto p1 = open(store, 1, "local1");
  ASSERT_TRUE(p1->engine);
  const std::string input = value(4000, 'i');
  declare(*p1->engine);
  start(*p1->engine, "f", input);
  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("f");
  auto* a = set.add_writes();
  a->set_key("doc");
  a->mutable_value()->set_string_value(value(3000, 'd'));
  ASSERT_TRUE(p1->engine->set_attributes(set).is_ok());
  // A crash, then a new process on a fresh local store: it replays the log.
  p1->lease = false;
  p1->engine.reset();
  p1->writer.reset();
  clock_.advance(seconds(5));
  auto p2 = open(store, 2, "local2");
  ASSERT_TRUE(p2->engine);
  Engine& e2 = *p2->engine;
  auto d = e2.describe_flow(flow_ref("f"));
  ASSERT_TRUE(d.is_ok()) << d.status().to_string();
  EXPECT_EQ(d->input().data(), input);
  flow::GetAttributesRequest get;
  get.mutable_flow()->set_flow_id("f");
  auto attrs = e2.get_attributes(get);
  ASSERT_TRUE(attrs.is_ok()) << attrs.status().to_string();
  ASSERT_EQ(attrs->attributes_size(), 1);
  EXPECT_EQ(attrs->attributes(0).value().string_value(), value(3000, 'd'));
  // Its Worker gets the task whole, with the Attribute it reads.
  auto w2 = std::make_shared<FlowWorker>();
  connect_flows(e2, w2, "w2", doc_declaration());
  auto task = w2->next();
  ASSERT_TRUE(task);
  EXPECT_EQ(task->input().data(), input);
  ASSERT_EQ(task->attributes_size(), 1);
  EXPECT_EQ(task->attributes(0).value().string_value(), value(3000, 'd'));
}

TEST_F(FlowBlobsTest, AHistoryPageEndsAtTheMessageBudgetAndTheRestFollows) {
  MemoryObjectStore store;
  EngineProcess p;
  open_process(p, store, 1, dir_.sub("local1"), [](EngineOptions& eo) {
    small_values(eo);
    eo.values.message_bytes_max = 200 * 1024;
  });
  ASSERT_TRUE(p.engine);
  Engine& e = *p.engine;
  declare(e);
  start(e, "f", "in");
  for (int i = 0; i < 5; ++i) {
    flow::PublishToChannelRequest pub;
    pub.set_flow_id("f");
    pub.set_channel("approval");
    pub.add_messages()->set_data(value(60 * 1024, static_cast<char>('a' + i)));
    ASSERT_TRUE(e.publish(pub).is_ok());
  }
  std::vector<std::string> messages;
  flow::GetHistoryEventsRequest h;
  h.mutable_flow()->set_flow_id("f");
  h.set_from_start(true);
  int pages = 0;
  while (pages < 10) {  // bounded: 5 messages, at least one event a page
    ++pages;
    auto page = e.history(h);
    ASSERT_TRUE(page.is_ok()) << page.status().to_string();
    ASSERT_GT(page->events_size(), 0);
    EXPECT_LE(page->ByteSizeLong(), 200u * 1024);
    for (const auto& ev : page->events())
      for (const auto& m : ev.publish().messages()) messages.push_back(m.data());
    if (!page->more()) break;
    h.set_from_start(false);
    h.set_after_seq(page->events(page->events_size() - 1).seq());
  }
  EXPECT_EQ(pages, 2);  // 200 KiB a page: three 60 KiB messages, then two
  ASSERT_EQ(messages.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(messages[i], value(60 * 1024, static_cast<char>('a' + i)));

  // Writes of one key in one call: the last wins, read back from its blob.
  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("f");
  for (int i = 0; i < 4; ++i) {
    auto* w = set.add_writes();
    w->set_key("doc");
    w->mutable_value()->set_string_value(value(60 * 1024, static_cast<char>('a' + i)));
  }
  ASSERT_TRUE(e.set_attributes(set).is_ok());  // the last write wins: 60 KiB
  flow::GetAttributesRequest get;
  get.mutable_flow()->set_flow_id("f");
  auto attrs = e.get_attributes(get);
  ASSERT_TRUE(attrs.is_ok()) << attrs.status().to_string();
  EXPECT_EQ(attrs->attributes(0).value().string_value(), value(60 * 1024, 'd'));
}

TEST_F(FlowBlobsTest, TheStateShowsLongValuesWholeWithinHalfTheMessageBudget) {
  MemoryObjectStore store;
  EngineProcess p;
  open_process(p, store, 1, dir_.sub("local1"), [](EngineOptions& eo) {
    small_values(eo);
    eo.values.message_bytes_max = 400 * 1024;  // values in a state: 200 KiB at most
  });
  ASSERT_TRUE(p.engine);
  Engine& e = *p.engine;
  declare(e);
  start(e, "f", "in");
  flow::PublishToChannelRequest pub;
  pub.set_flow_id("f");
  pub.set_channel("approval");
  for (int i = 0; i < 6; ++i)
    pub.add_messages()->set_data(value(60 * 1024, static_cast<char>('a' + i)));
  ASSERT_TRUE(e.publish(pub).is_ok());
  flow::SetAttributesRequest set;
  set.mutable_flow()->set_flow_id("f");
  auto* w = set.add_writes();
  w->set_key("doc");
  w->mutable_value()->set_string_value(value(2000, 'd'));
  ASSERT_TRUE(e.set_attributes(set).is_ok());

  auto state = e.flow_state(flow_ref("f"));
  ASSERT_TRUE(state.is_ok()) << state.status().to_string();
  ASSERT_EQ(state->queues_size(), 1);
  const auto& q = state->queues(0);
  EXPECT_EQ(q.count(), 6u);
  ASSERT_EQ(q.messages_size(), 5);
  // Three fit in 200 KiB, read back from their blobs; the next two are left
  // out with their length.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(q.messages(i).message().data(), value(60 * 1024, static_cast<char>('a' + i)));
    EXPECT_FALSE(q.messages(i).message().has_blob());
    EXPECT_EQ(q.messages(i).omitted_bytes(), 0u);
  }
  for (int i = 3; i < 5; ++i) {
    EXPECT_FALSE(q.messages(i).has_message());
    EXPECT_GE(q.messages(i).omitted_bytes(), 60u * 1024);
  }
  // The Attribute (a blob too) still fits.
  ASSERT_EQ(state->attributes_size(), 1);
  EXPECT_EQ(state->attributes(0).attribute().value().string_value(), value(2000, 'd'));
  EXPECT_FALSE(state->attributes(0).attribute().value().has_blob());
  EXPECT_EQ(state->attributes(0).omitted_bytes(), 0u);
}

TEST_F(FlowBlobsTest, AReferenceFromAClientIsRefused) {
  MemoryObjectStore store;
  auto p = open(store, 1, "local1");
  ASSERT_TRUE(p->engine);
  flow::PublishToChannelRequest pub;
  pub.set_flow_id("f");
  pub.set_channel("approval");
  auto* m = pub.add_messages();
  m->mutable_blob()->set_key(BlobStore::node_prefix(kNode) + "x/y");
  Status s = p->engine->publish(pub);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("messages[0] carries a blob reference"));
}

}  // namespace
}  // namespace dex
