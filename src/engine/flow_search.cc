// FlowEngine's SearchFlows (docs/search.md): the planner of src/search over
// one RocksDB snapshot, which also names the slot it shows. The index is
// written by the flow rules in each batch's own WriteBatch, so the snapshot
// holds every acknowledged write: no wait, no lag.
#include "engine/flow_engine.h"
#include "engine/flow_reads.h"
#include "engine/rocks_kv.h"
#include "engine/state_machine.h"
#include "search/completion.h"
#include "search/index_reader.h"
#include "search/search.h"

namespace dex {
namespace {

// The planner's reads over a snapshot view.
class SnapshotReader final : public search::IndexReader {
 public:
  explicit SnapshotReader(RocksKv& kv) : kv_(kv) {}
  std::optional<std::string> get(std::string_view key) override { return kv_.get(key); }
  void scan(std::string_view from, std::string_view to, bool reverse, const Visit& visit) override {
    kv_.visit(from, to, reverse, visit);
  }

 private:
  RocksKv& kv_;
};

}  // namespace

StatusOr<flow::SearchFlowsResponse> FlowEngine::search_flows(
    const flow::SearchFlowsRequest& request) {
  return with_view([&](RocksKv& kv) -> StatusOr<flow::SearchFlowsResponse> {
    SnapshotReader reader(kv);
    auto page = search::search_flows(reader, request);
    if (!page.is_ok()) return page.status();
    if (!kv.status().is_ok()) return kv.status();
    auto slot = StateMachine::applied_slot(kv);
    if (!slot.is_ok()) return slot.status();
    page->set_applied_slot(*slot);
    return page;
  });
}

StatusOr<flow::ListSearchKeysResponse> FlowEngine::list_search_keys(
    const flow::ListSearchKeysRequest& request) {
  return with_view([&](RocksKv& kv) -> StatusOr<flow::ListSearchKeysResponse> {
    SnapshotReader reader(kv);
    auto keys = search::list_search_keys(reader, request);
    if (!keys.is_ok()) return keys.status();
    if (!kv.status().is_ok()) return kv.status();
    auto slot = StateMachine::applied_slot(kv);
    if (!slot.is_ok()) return slot.status();
    keys->set_applied_slot(*slot);
    return keys;
  });
}

StatusOr<flow::ListSearchValuesResponse> FlowEngine::list_search_values(
    const flow::ListSearchValuesRequest& request) {
  return with_view([&](RocksKv& kv) -> StatusOr<flow::ListSearchValuesResponse> {
    SnapshotReader reader(kv);
    auto values = search::list_search_values(reader, request);
    if (!values.is_ok()) return values.status();
    if (!kv.status().is_ok()) return kv.status();
    auto slot = StateMachine::applied_slot(kv);
    if (!slot.is_ok()) return slot.status();
    values->set_applied_slot(*slot);
    return values;
  });
}

}  // namespace dex
