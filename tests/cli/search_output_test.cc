// dexcli's search output and `flow list`'s query: the JSON of a row and a
// page (each index type's value), the table, the filters written as a query
// (quoting, one value or IN), status names and time bounds.
#include <gtest/gtest.h>

#include "cli/list_query.h"
#include "cli/search_output.h"

namespace dex::cli {
namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kNow = 1'800'000'000'000;  // 2027-01-15T08:00:00Z

flow::SearchField field(const std::string& key, flow::IndexType type) {
  flow::SearchField f;
  f.set_key(key);
  f.set_type(type);
  return f;
}

flow::FlowSearchRow order_row() {
  flow::FlowSearchRow r;
  r.set_flow_id("o-1");
  r.set_run_id("r-1");
  r.set_flow_type("OrderProcessing");
  r.set_status(flow::FLOW_COMPLETED);
  r.set_start_unix_ms(kNow - 60'000);
  r.set_close_unix_ms(kNow - 55'000);
  auto* f = r.add_fields();
  *f = field("PlacedAt", flow::INDEX_DATETIME);
  f->set_time_ms(kNow);
  *(f = r.add_fields()) = field("customer", flow::INDEX_KEYWORD);
  f->set_text("acme");
  *(f = r.add_fields()) = field("items", flow::INDEX_INT);
  f->set_int_value(3);
  *(f = r.add_fields()) = field("tags", flow::INDEX_KEYWORD_ARRAY);
  f->add_items("eu");
  f->add_items("gift");
  *(f = r.add_fields()) = field("total", flow::INDEX_DOUBLE);
  f->set_double_value(99.5);
  *(f = r.add_fields()) = field("vip", flow::INDEX_BOOL);
  f->set_bool_value(false);
  return r;
}

TEST(SearchOutput, ARowPrintsItsProtoFieldsAndItsIndexValuesByKey) {
  EXPECT_EQ(search_row_json(order_row()), json::parse(R"({
      "flowId": "o-1", "runId": "r-1", "flowType": "OrderProcessing", "status": "COMPLETED",
      "startUnixMs": 1799999940000, "closeUnixMs": 1799999945000,
      "fields": {"PlacedAt": "2027-01-15T08:00:00.000Z", "customer": "acme", "items": 3,
                 "tags": ["eu", "gift"], "total": 99.5, "vip": false}})"));
  // A running top-level run without fields: no close time, parent or fields.
  flow::FlowSearchRow running;
  running.set_flow_id("o-2");
  running.set_run_id("r-2");
  running.set_flow_type("OrderProcessing");
  running.set_status(flow::FLOW_RUNNING);
  running.set_start_unix_ms(kNow);
  EXPECT_EQ(search_row_json(running), json::parse(R"({"flowId": "o-2", "runId": "r-2",
      "flowType": "OrderProcessing", "status": "RUNNING", "startUnixMs": 1800000000000})"));
  flow::SearchField text = field("note", flow::INDEX_FULL_TEXT);
  text.set_text("Late delivery");
  text.add_items("late");
  EXPECT_EQ(search_field_json(text), "Late delivery");
  flow::SearchField inf = field("x", flow::INDEX_DOUBLE);
  inf.set_double_value(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(search_field_json(inf), "-Infinity");
}

TEST(SearchOutput, APageCarriesItsQueryRowsTokenAndSlotEvenWhenEmpty) {
  flow::SearchFlowsResponse page;
  page.set_applied_slot(7);
  EXPECT_EQ(search_page_json("Status = 'FAILED'", page), json::parse(R"({
      "query": "Status = 'FAILED'", "rows": [], "nextPageToken": "", "appliedSlot": 7})"));
  *page.add_rows() = order_row();
  page.set_next_page_token("tok");
  const json out = search_page_json("", page);
  EXPECT_EQ(out["rows"].size(), 1u);
  EXPECT_EQ(out["nextPageToken"], "tok");
}

TEST(SearchOutput, TheTableHasAColumnPerIndexKeyAndADashWhereARowHasNone) {
  flow::FlowSearchRow other;
  other.set_flow_id("s-1");
  other.set_run_id("r-9");
  other.set_flow_type("SignUp");
  other.set_status(flow::FLOW_RUNNING);
  other.set_start_unix_ms(kNow - 1500);
  other.set_parent_flow_id("p-1");
  const std::string table = search_table({order_row(), other}, kNow);
  EXPECT_NE(table.find("FLOW ID  RUN ID  TYPE             STATUS     STARTED"), std::string::npos)
      << table;
  EXPECT_NE(table.find("TOOK  PARENT  PlacedAt                  customer  items  tags     total  "
                       "vip\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("o-1      r-1     OrderProcessing  COMPLETED  2027-01-15 07:59:00.000 UTC "
                       "(1m00s ago)  5.0s  -       2027-01-15T08:00:00.000Z  acme      3      "
                       "eu,gift  99.5   false\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("(1.5s ago)   -     p-1     -                         -         -      -"),
            std::string::npos)
      << table;
  EXPECT_EQ(search_table({}, kNow), "no runs\n");
}

TEST(ListQuery, TheFiltersBecomeOneQueryNewestFirst) {
  EXPECT_EQ(list_query({}), "ORDER BY StartTime DESC");
  ListFilter f;
  f.flow_types = {"OrderProcessing"};
  EXPECT_EQ(list_query(f), "FlowType = 'OrderProcessing' ORDER BY StartTime DESC");
  f.flow_types.push_back("it's");
  f.statuses = {"RUNNING", "TIMED_OUT"};
  f.since_unix_ms = kNow;
  f.until_unix_ms = kNow + 1;
  EXPECT_EQ(list_query(f),
            "FlowType IN ('OrderProcessing', 'it\\'s') AND Status IN ('RUNNING', 'TIMED_OUT') AND "
            "StartTime >= '2027-01-15T08:00:00.000Z' AND StartTime < "
            "'2027-01-15T08:00:00.001Z' ORDER BY StartTime DESC");
  EXPECT_EQ(quote_literal("a\\b\n\t'"), "'a\\\\b\\n\\t\\''");
}

TEST(ListQuery, StatusesReadInAnyCaseAndABadOneListsTheChoices) {
  for (const auto& [text, want] :
       std::vector<std::pair<std::string, std::string>>{{"running", "RUNNING"},
                                                        {"Completed", "COMPLETED"},
                                                        {"timed-out", "TIMED_OUT"},
                                                        {"TIMED_OUT", "TIMED_OUT"},
                                                        {"cancelled", "CANCELED"},
                                                        {"terminated", "TERMINATED"},
                                                        {"failed", "FAILED"}}) {
    auto s = status_literal(text);
    ASSERT_TRUE(s.is_ok()) << text;
    EXPECT_EQ(*s, want);
  }
  EXPECT_EQ(status_literal("done").status().message(),
            "'done' is not a run status (RUNNING, COMPLETED, FAILED, CANCELED, TERMINATED, "
            "TIMED_OUT, CONTINUED_AS_NEW)");
  auto continued = status_literal("continued-as-new");
  ASSERT_TRUE(continued.is_ok());
  EXPECT_EQ(*continued, "CONTINUED_AS_NEW");
}

TEST(ListQuery, ATimeBoundIsADurationBeforeNowAnRfc3339TimeOrUnixMs) {
  EXPECT_EQ(*parse_time_bound("1h", kNow), kNow - 3'600'000);
  EXPECT_EQ(*parse_time_bound("30m", kNow), kNow - 1'800'000);
  EXPECT_EQ(*parse_time_bound("100000d", kNow), 0) << "before 1970: from the start";
  EXPECT_EQ(*parse_time_bound("2027-01-15T09:00:00+01:00", kNow), kNow);
  EXPECT_EQ(*parse_time_bound("1800000000000", kNow), kNow);
  auto bad = parse_time_bound("yesterday", kNow);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(),
            "'yesterday' is neither a duration before now (30m, 1h, 7d) nor a time (RFC 3339 such "
            "as 2027-01-15T10:00:00Z, or Unix milliseconds)");
}

}  // namespace
}  // namespace dex::cli
