// dexcli's JSON (proto_json.h) and tables (flow_table.h) for dex Flows.
#include <gtest/gtest.h>

#include "cli/flow_table.h"
#include "cli/proto_json.h"
#include "cli/sub_flows.h"

namespace dex::cli {
namespace {

using json = nlohmann::ordered_json;

flow::Payload payload(const std::string& text) {
  flow::Payload p;
  p.set_data(text);
  return p;
}

TEST(ProtoJson, EnumsLoseOnlyTheirTypesOwnPrefix) {
  EXPECT_EQ(enum_value_text(*flow::FlowStatus_descriptor(), flow::FLOW_TIMED_OUT), "TIMED_OUT");
  EXPECT_EQ(enum_value_text(*flow::TaskState_descriptor(), flow::TASK_QUEUED), "QUEUED");
  EXPECT_EQ(enum_value_text(*flow::Phase_descriptor(), flow::PHASE_WAIT_FOR), "WAIT_FOR");
  EXPECT_EQ(enum_value_text(*flow::AttemptOutcome_descriptor(), flow::ATTEMPT_NOT_COMPLETED),
            "NOT_COMPLETED");
  EXPECT_EQ(enum_value_text(*flow::StopMode_descriptor(), flow::STOP_FAIL), "FAIL");
  // Values that share a word but not the type's prefix keep their names.
  EXPECT_EQ(enum_value_text(*flow::ChannelMatch_descriptor(), flow::FOR_ONE), "FOR_ONE");
  EXPECT_EQ(enum_value_text(*flow::HistoryKind_descriptor(), flow::FLOW_STARTED), "FLOW_STARTED");
  EXPECT_EQ(enum_value_text(*flow::Method_descriptor(), flow::WAIT_FOR), "WAIT_FOR");
  EXPECT_EQ(enum_value_text(*flow::FlowStatus_descriptor(), 99), "UNKNOWN");
}

TEST(ProtoJson, PayloadsAreEmbeddedValuesAndEmptyFieldsAreLeftOut) {
  flow::FlowDescription d;
  d.set_flow_id("o-1");
  d.set_status(flow::FLOW_COMPLETED);
  d.set_start_unix_ms(1'796'161'893'832);
  *d.mutable_input() = payload(R"({"amount": 42})");
  auto* out = d.add_outputs();
  out->set_step_execution_id("Ship-2");
  *out->mutable_output() = payload("\"shipped\"");
  const json j = proto_to_json(d);
  EXPECT_EQ(j, json::parse(R"({"flowId": "o-1", "status": "COMPLETED",
      "startUnixMs": 1796161893832, "outputs": [{"stepExecutionId": "Ship-2", "output": "shipped"}],
      "input": {"amount": 42}})"))
      << j.dump();
  // Text that is not JSON stays a string rather than failing the output.
  *d.mutable_input() = payload("not json");
  EXPECT_EQ(proto_to_json(d)["input"], "not json");
  // Nor do bytes that are not UTF-8.
  *d.mutable_input() = payload("\xff\xfe");
  EXPECT_NE(json_text(proto_to_json(d)).find("\"input\":\"\xef\xbf\xbd"), std::string::npos);
}

TEST(FlowTable, AgesAndTimesReadAsPeopleWriteThem) {
  EXPECT_EQ(age_text(850), "850ms");
  EXPECT_EQ(age_text(5'240), "5.2s");
  EXPECT_EQ(age_text(192'000), "3m12s");
  EXPECT_EQ(age_text(7'500'000), "2h05m");
  EXPECT_EQ(age_text(3 * 86'400'000LL + 4 * 3'600'000LL), "3d04h");
  EXPECT_EQ(time_text(0, 5), "-");
  EXPECT_EQ(time_text(1'796'161'893'832, 1'796'161'898'832),
            "2026-12-01 21:51:33.832 UTC (5.0s ago)");
  EXPECT_EQ(time_text(1'796'161'893'832, 1'796'161'893'000),
            "2026-12-01 21:51:33.832 UTC (in 832ms)");
}

TEST(FlowTable, HistoryIsNewestFirst) {
  std::vector<flow::HistoryEvent> events(3);
  events[0].set_kind(flow::FLOW_STARTED);
  events[1].set_seq(1);
  events[1].set_kind(flow::CHANNEL_PUBLISHED);
  events[1].mutable_publish()->set_channel("verify");
  events[2].set_seq(2);
  events[2].set_kind(flow::FLOW_CLOSED);
  events[2].set_status(flow::FLOW_FAILED);
  events[2].set_reason("fraud");
  const std::string table = history_table(events, 0);
  const size_t closed = table.find("FLOW_CLOSED"), published = table.find("CHANNEL_PUBLISHED"),
               started = table.find("FLOW_STARTED");
  ASSERT_NE(started, std::string::npos) << table;
  EXPECT_LT(closed, published);
  EXPECT_LT(published, started);
  EXPECT_NE(table.find("FAILED: fraud"), std::string::npos) << table;
  EXPECT_NE(table.find(R"({"channel":"verify"})"), std::string::npos) << table;
}

TEST(FlowTable, AHintNamesTheFlowTypeNoWorkerHosts) {
  flow::GetFlowStateResponse s;
  s.mutable_flow()->set_flow_type("SignUp");
  s.mutable_flow()->set_status(flow::FLOW_RUNNING);
  auto* e = s.add_active();
  e->set_step_execution_id("SendEmail-1");
  e->set_task_state(flow::TASK_QUEUED);
  auto hints = state_hints(s);
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_NE(hints[0].find("no Worker connected to this server hosts Flow type 'SignUp'"),
            std::string::npos);
  s.add_workers("w-1");  // a Worker hosts it: the task just waits its turn
  EXPECT_TRUE(state_hints(s).empty());
  s.mutable_flow()->set_status(flow::FLOW_COMPLETED);
  s.clear_workers();
  EXPECT_TRUE(state_hints(s).empty());  // a closed run needs no Worker
  const std::string table = state_table(s, {"Other", ""}, {}, 0);
  EXPECT_NE(table.find("(no active Step execution matches)"), std::string::npos) << table;
}

TEST(FlowTable, TheStateShowsEndedExecutionsQueuedMessagesAndAttributes) {
  flow::GetFlowStateResponse s;
  s.mutable_flow()->set_flow_type("SignUp");
  s.mutable_flow()->set_status(flow::FLOW_RUNNING);
  s.add_active()->set_step_execution_id("Wait-1");
  auto* done = s.add_ended();
  done->set_step_execution_id("Start-1");
  done->set_step_type("Start");
  done->set_phase(flow::PHASE_DONE);
  done->set_method(flow::EXECUTE);
  done->set_attempt(2);
  auto* failed = s.add_ended();
  failed->set_step_execution_id("Check-1");
  failed->set_step_type("Check");
  failed->set_phase(flow::PHASE_FAILED);
  failed->mutable_last_failure()->set_attempt(3);
  failed->mutable_last_failure()->set_error("no such user");
  s.set_ended_count(102);
  auto* q = s.add_queues();
  q->set_channel("votes");
  q->set_instance_key("ann");
  q->set_count(7);
  auto* m = q->add_messages();
  m->set_seq(4);
  m->mutable_message()->set_data(R"({"vote":"yes"})");
  m = q->add_messages();
  m->set_seq(5);
  m->set_omitted_bytes(3'000'000);
  s.set_queues_omitted(2);
  auto* a = s.add_attributes()->mutable_attribute();
  a->set_key("total");
  a->mutable_value()->set_int64_value(42);
  auto* big = s.add_attributes();
  big->mutable_attribute()->set_key("doc");
  big->set_omitted_bytes(9'000'000);

  const std::string table = state_table(s, {}, {}, 0);
  for (const char* text :
       {"Ended Step executions (102 in all, newest first):", "Start-1", "DONE", "EXECUTE #2",
        "Check-1", "FAILED", "attempt 3", "no such user",
        "(100 older ended Step executions not shown)", "Queued Channel messages:", "votes[ann]",
        R"({"vote":"yes"})", "(left out: 3000000 bytes)", "5 more", "(2 more queues hold messages)",
        "Attributes:", "total", "42", "doc: value left out"}) {
    EXPECT_NE(table.find(text), std::string::npos) << text << "\n" << table;
  }
  // The filters apply to the ended executions too.
  const std::string failed_only = state_table(s, {"", "FAILED"}, {}, 0);
  EXPECT_NE(failed_only.find("Check-1"), std::string::npos) << failed_only;
  EXPECT_EQ(failed_only.find("Start-1"), std::string::npos) << failed_only;
  // The JSON holds every section.
  const json j = proto_to_json(s);
  EXPECT_EQ(j["ended"][0]["stepExecutionId"], "Start-1");
  EXPECT_EQ(j["endedCount"], 102);
  EXPECT_EQ(j["queues"][0]["instanceKey"], "ann");
  EXPECT_EQ(j["queues"][0]["messages"][0]["message"], json::parse(R"({"vote":"yes"})"));
  EXPECT_EQ(j["queues"][0]["messages"][1]["omittedBytes"], 3'000'000);
  EXPECT_EQ(j["attributes"][0]["attribute"]["key"], "total");

  flow::GetFlowStateResponse empty;
  const std::string none = state_table(empty, {}, {}, 0);
  EXPECT_NE(none.find("Queued Channel messages:\n(none)"), std::string::npos) << none;
  EXPECT_NE(none.find("Attributes:\n(none)"), std::string::npos) << none;
}

TEST(SubFlows, ChildrenComeFromTheHistoryWithTheirEndAndParentsFromTheDescription) {
  std::vector<flow::HistoryEvent> events(4);
  events[0].set_kind(flow::SUB_FLOW_STARTED);
  events[0].set_step_execution_id("Fan-1");
  events[0].set_condition_index(0);
  events[0].set_child_flow_id("p/Fan-1/0");
  events[0].set_child_run_id("r");
  events[1] = events[0];
  events[1].set_condition_index(1);
  events[1].set_child_flow_id("p/Fan-1/1");
  events[1].set_attached(true);
  events[2].set_kind(flow::SUB_FLOW_CLOSED);
  events[2].set_step_execution_id("Fan-1");
  events[2].set_condition_index(0);
  events[2].set_child_flow_id("p/Fan-1/0");
  events[2].set_child_run_id("r.2");  // its Flow retry's run
  events[2].set_status(flow::FLOW_FAILED);
  events[2].set_reason("boom");
  events[3].set_kind(flow::FLOW_CLOSED);
  events[3].set_status(flow::FLOW_COMPLETED);
  const std::vector<SubFlowChild> children = sub_flow_children(events);
  flow::FlowDescription d;
  auto* parent = d.add_parents();
  parent->set_flow_id("gp");
  parent->set_run_id("gr");
  parent->set_step_execution_id("Up-2");
  parent->set_condition_index(3);
  EXPECT_EQ(sub_flows_json(d, children), json::parse(R"({
      "parents": [{"flowId": "gp", "runId": "gr", "stepExecutionId": "Up-2", "conditionIndex": 3}],
      "children": [{"stepExecutionId": "Fan-1", "conditionIndex": 0, "flowId": "p/Fan-1/0",
                    "runId": "r.2", "attached": false, "status": "FAILED", "reason": "boom"},
                   {"stepExecutionId": "Fan-1", "conditionIndex": 1, "flowId": "p/Fan-1/1",
                    "runId": "r", "attached": true}]})"));
  EXPECT_EQ(sub_flows_table(d, children),
            "parent  gp run gr (Up-2 condition 3)\n"
            "child   p/Fan-1/0 run r.2 (Fan-1 condition 0) FAILED: boom\n"
            "child   p/Fan-1/1 run r (Fan-1 condition 1, attached) open\n");
  EXPECT_EQ(sub_flows_table(flow::FlowDescription(), {}), "(none)\n");
  // The history table names each child; the description its parents and retry links.
  EXPECT_NE(history_table(events, 0).find("condition 0 child p/Fan-1/0 run r.2 FAILED: boom"),
            std::string::npos)
      << history_table(events, 0);
  d.set_flow_attempt(2);
  d.set_previous_run_id("r1");
  d.set_next_run_id("r1.3");
  const std::string described = describe_table(d, 0);
  for (const char* text : {"SubFlow of:", "gp run gr (Up-2 condition 3)",
                           "Flow attempt:", "2 (after run r1)", "Retried as:", "r1.3"}) {
    EXPECT_NE(described.find(text), std::string::npos) << text << "\n" << described;
  }
}

TEST(FlowTable, TheDescriptionAndHistoryNameTheRunsOfAContinueAsNewChain) {
  flow::FlowDescription d;
  d.set_flow_id("f");
  d.set_run_id("r.c1");
  d.set_status(flow::FLOW_CONTINUED_AS_NEW);
  d.set_continued_from_run_id("r");
  d.set_next_run_id("r.c2");
  const std::string described = describe_table(d, 0);
  for (const char* text : {"CONTINUED_AS_NEW", "Continues run:", "Continued as:", "r.c2"})
    EXPECT_NE(described.find(text), std::string::npos) << text << "\n" << described;
  EXPECT_EQ(described.find("Retried as"), std::string::npos) << described;

  std::vector<flow::HistoryEvent> events(2);
  events[0].set_seq(0);
  events[0].set_kind(flow::FLOW_STARTED);
  events[0].set_continued_from_run_id("r");
  events[1].set_seq(1);
  events[1].set_kind(flow::FLOW_CLOSED);
  events[1].set_status(flow::FLOW_CONTINUED_AS_NEW);
  events[1].set_next_run_id("r.c2");
  const std::string history = history_table(events, 0);
  EXPECT_NE(history.find("continues run r"), std::string::npos) << history;
  EXPECT_NE(history.find("continued as run r.c2"), std::string::npos) << history;
}

TEST(FlowTable, TheDescriptionSaysWhenRetentionDeletesTheRun) {
  flow::FlowDescription d;
  d.set_flow_id("f");
  d.set_status(flow::FLOW_COMPLETED);
  EXPECT_EQ(describe_table(d, 0).find("Deleted"), std::string::npos) << "none scheduled";
  d.set_expire_unix_ms(1'796'161'893'832);
  const std::string described = describe_table(d, 1'796'161'893'832 - 3'600'000);
  EXPECT_NE(described.find("Deleted:"), std::string::npos) << described;
  EXPECT_NE(described.find("2026-12-01 21:51:33.832 UTC (in 1h00m) (flows.retention)"),
            std::string::npos)
      << described;
}

TEST(FlowTable, StateShowsTheFlowConfigAndHistoryWhatAnUpdateChanged) {
  flow::GetFlowStateResponse s;
  s.mutable_flow()->set_flow_id("f");
  auto* c = s.mutable_config();
  c->set_default_durability(flow::ASYNC);
  c->set_continue_as_new_after_events(500);
  c->set_index_active_step_types(false);
  const std::string table = state_table(s, {}, {}, 0);
  EXPECT_NE(table.find("FlowConfig: durability ASYNC, continue-as-new after 500 events, "
                       "continue-as-new after never, Attribute Store none, ActiveStepTypes "
                       "not indexed\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(proto_to_json(s)["config"],
            json::parse(R"({"continueAsNewAfterEvents":500,"defaultDurability":"ASYNC",)"
                        R"("indexActiveStepTypes":false})"));

  std::vector<flow::HistoryEvent> events(1);
  events[0].set_kind(flow::FLOW_CONFIG_UPDATED);
  events[0].mutable_old_config()->set_attribute_store("crm");
  *events[0].mutable_new_config() = events[0].old_config();
  events[0].mutable_new_config()->set_default_durability(flow::ASYNC);
  events[0].mutable_new_config()->set_continue_as_new_after_bytes(4096);
  const std::string history = history_table(events, 0);
  EXPECT_NE(history.find("FLOW_CONFIG_UPDATED"), std::string::npos) << history;
  EXPECT_NE(history.find("config durability SYNC -> ASYNC, continue-as-new after never -> 4096 "
                         "bytes"),
            std::string::npos)
      << history;
  EXPECT_EQ(config_change_text(events[0].old_config(), events[0].old_config()), "no change");
}

}  // namespace
}  // namespace dex::cli
