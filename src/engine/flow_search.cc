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

// One answer of the index (`read` over the snapshot), stamped with the slot
// the snapshot shows; a read error of the store fails it rather than answering
// part of the index.
template <typename Response, typename Read>
StatusOr<Response> read_index(RocksKv& kv, Read read) {
  SnapshotReader reader(kv);
  StatusOr<Response> answer = read(reader);
  if (!answer.is_ok()) return answer.status();
  if (!kv.status().is_ok()) return kv.status();
  auto slot = StateMachine::applied_slot(kv);
  if (!slot.is_ok()) return slot.status();
  answer->set_applied_slot(*slot);
  return answer;
}

}  // namespace

StatusOr<flow::SearchFlowsResponse> FlowEngine::search_flows(
    const flow::SearchFlowsRequest& request) {
  return with_view([&](RocksKv& kv) {
    return read_index<flow::SearchFlowsResponse>(
        kv, [&](SnapshotReader& r) { return search::search_flows(r, request); });
  });
}

StatusOr<flow::ListSearchKeysResponse> FlowEngine::list_search_keys(
    const flow::ListSearchKeysRequest& request) {
  return with_view([&](RocksKv& kv) {
    return read_index<flow::ListSearchKeysResponse>(
        kv, [&](SnapshotReader& r) { return search::list_search_keys(r, request); });
  });
}

StatusOr<flow::ListSearchValuesResponse> FlowEngine::list_search_values(
    const flow::ListSearchValuesRequest& request) {
  return with_view([&](RocksKv& kv) {
    return read_index<flow::ListSearchValuesResponse>(
        kv, [&](SnapshotReader& r) { return search::list_search_values(r, request); });
  });
}

}  // namespace dex
