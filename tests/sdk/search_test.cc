// Finding Flows in the C++ SDK: index declarations on Attributes (what the
// declaration says, every index the server would refuse refused when the
// Attribute is constructed, Flow::validate's checks across Attributes), typed
// reads of search rows, Client::search_flows / search_pages / for_each_flow
// against the fake dex.FlowService, and end to end against real ApiServers
// over a real Engine: runs found by their indexed Attributes, paged through,
// across a switch of the active process in the middle of the pages.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <ranges>
#include <thread>

#include "api_process.h"
#include "fake_server.h"
#include "node_engine.h"
#include "sdk/client.h"
#include "sdk/worker.h"

namespace dex {
namespace {

using nlohmann::json;
using testing::FakeAdminService;
using testing::FakeFlowService;
using testing::FakeServer;
using testing::FakeWorkerTaskService;

constexpr Duration kWait = seconds(10);

// The message of what `make` throws; "" when it throws nothing.
template <typename Make>
std::string thrown(Make&& make) {
  try {
    make();
  } catch (const AttributeError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---------------------------------------------------------------- declarations

TEST(IndexDeclarations, AnIndexedAttributeDeclaresItsTypeAndTheKeyQueriesUse) {
  const Attribute<std::string> customer{"customer", flow::INDEX_KEYWORD};
  const Attribute<double> total{"total", {flow::INDEX_DOUBLE, "OrderTotal"}};
  const Attribute<std::string> note{"note"};
  EXPECT_TRUE(customer.indexed());
  EXPECT_EQ(customer.index_type(), flow::INDEX_KEYWORD);
  EXPECT_EQ(customer.index_key(), "customer");  // the Attribute's key by default
  EXPECT_EQ(total.index_key(), "OrderTotal");
  EXPECT_FALSE(note.indexed());
  EXPECT_EQ(note.index_key(), "");

  const flow::AttributeDeclaration c = customer.declaration();
  EXPECT_EQ(c.index().type(), flow::INDEX_KEYWORD);
  EXPECT_EQ(c.index().index_key(), "") << "the default key is left to the server";
  const flow::AttributeDeclaration t = total.declaration();
  EXPECT_EQ(t.index().type(), flow::INDEX_DOUBLE);
  EXPECT_EQ(t.index().index_key(), "OrderTotal");
  EXPECT_FALSE(note.declaration().has_index());
}

// What fits() in src/flow/search_index.cc accepts, type by type.
TEST(IndexDeclarations, EveryIndexTypeTheServerRefusesForAnAttributeTypeIsRefusedAtDeclaration) {
  struct Case {
    flow::IndexType index;
    std::vector<flow::AttributeType> fits;
  };
  const std::vector<Case> cases = {
      {flow::INDEX_KEYWORD, {flow::ATTRIBUTE_STRING}},
      {flow::INDEX_FULL_TEXT, {flow::ATTRIBUTE_STRING}},
      {flow::INDEX_KEYWORD_ARRAY, {flow::ATTRIBUTE_STRING, flow::ATTRIBUTE_JSON}},
      {flow::INDEX_INT, {flow::ATTRIBUTE_INT64}},
      {flow::INDEX_DOUBLE, {flow::ATTRIBUTE_DOUBLE, flow::ATTRIBUTE_INT64}},
      {flow::INDEX_BOOL, {flow::ATTRIBUTE_BOOL}},
      {flow::INDEX_DATETIME, {flow::ATTRIBUTE_DATETIME}},
  };
  for (const Case& c : cases) {
    for (int t = flow::ATTRIBUTE_STRING; t <= flow::ATTRIBUTE_BYTES; ++t) {
      const auto type = static_cast<flow::AttributeType>(t);
      const bool fits = std::find(c.fits.begin(), c.fits.end(), type) != c.fits.end();
      const std::string error = thrown([&] { AttributeDef("a", type, false, c.index); });
      if (fits) {
        EXPECT_EQ(error, "") << index_type_name(c.index) << " on " << attribute_type_name(type);
      } else {
        EXPECT_TRUE(contains(error, "Attribute 'a' cannot have a " +
                                        std::string(index_type_name(c.index)) + " index"))
            << index_type_name(c.index) << " on " << attribute_type_name(type) << ": " << error;
      }
    }
  }
  // Typed, with what the message tells the reader.
  EXPECT_EQ(thrown([] { Attribute<std::string>("total", flow::INDEX_DOUBLE); }),
            "string Attribute 'total' cannot have a DOUBLE index: DOUBLE indexes double or "
            "int64_t Attributes");
  EXPECT_EQ(thrown([] { Attribute<bool>("vip", flow::INDEX_KEYWORD); }),
            "bool Attribute 'vip' cannot have a KEYWORD index: KEYWORD indexes std::string "
            "Attributes");
  EXPECT_EQ(thrown([] { Attribute<int64_t>("items", flow::INDEX_DOUBLE); }), "");
}

TEST(IndexDeclarations, AnIndexKeyThatIsASystemFieldsNameOrNoNameIsRefused) {
  // The Attribute's own key as the index key, in another case.
  EXPECT_EQ(thrown([] { Attribute<std::string>("status", flow::INDEX_KEYWORD); }),
            "string Attribute 'status': its index key 'status' is the name of the system field "
            "'Status' (in any case): give the index another key");
  EXPECT_TRUE(contains(thrown([] {
                         Attribute<DateTime>("due", {flow::INDEX_DATETIME, "STARTTIME"});
                       }),
                       "system field 'StartTime'"));
  EXPECT_EQ(thrown([] {
              Attribute<std::string>("status", {flow::INDEX_KEYWORD, "OrderStatus"});
            }),
            "");
  EXPECT_TRUE(contains(thrown([] {
                         Attribute<std::string>("s", {flow::INDEX_KEYWORD, std::string(256, 'k')});
                       }),
                       "is longer than 255 bytes"));
  EXPECT_TRUE(contains(thrown([] {
                         Attribute<std::string>("s", {flow::INDEX_KEYWORD, "a\nb"});
                       }),
                       "contains a control character"));
  EXPECT_TRUE(contains(thrown([] { Attribute<std::string>("s", flow::INDEX_TYPE_UNSPECIFIED); }),
                       "is not an index type"));
  EXPECT_TRUE(
      contains(thrown([] { AttributeDef("m", flow::ATTRIBUTE_STRING, true, flow::INDEX_KEYWORD); }),
               "string AttributeMap 'm' cannot be indexed"));
}

TEST(IndexDeclarations, AKeywordArrayJsonAttributeHoldsAnArrayOfStringsAndNeedsItsIndex) {
  const Attribute<std::vector<std::string>> tags{"tags", flow::INDEX_KEYWORD_ARRAY};
  EXPECT_EQ(tags.type(), flow::ATTRIBUTE_JSON);
  EXPECT_EQ(tags.describe(), "JSON array of strings Attribute 'tags'");
  const flow::Attribute write = tags.write({"eu", "vip"});
  EXPECT_EQ(write.value().json_value(), R"(["eu","vip"])");
  flow::GetAttributesResponse got;
  *got.add_attributes() = write;
  EXPECT_EQ(tags.get(got), (std::vector<std::string>{"eu", "vip"}));
  // A stored object is not an array of strings: named.
  got.mutable_attributes(0)->mutable_value()->set_json_value(R"({"a":1})");
  EXPECT_TRUE(contains(thrown([&] { (void)tags.get(got); }),
                       "Attribute 'tags' does not hold a JSON array of strings value"));

  // The server takes an array only in an Attribute indexed KEYWORD_ARRAY.
  EXPECT_TRUE(contains(thrown([] { Attribute<std::vector<std::string>>("tags"); }),
                       "Attribute 'tags' holds a JSON array (std::vector<std::string>), which "
                       "the server takes only in an Attribute indexed KEYWORD_ARRAY"));
  EXPECT_TRUE(
      contains(thrown([] { Attribute<std::vector<std::string>>("tags", flow::INDEX_KEYWORD); }),
               "cannot have a KEYWORD index"));
  // A dex::JsonObject cannot hold the array such an index needs.
  EXPECT_TRUE(contains(thrown([] { Attribute<JsonObject>("doc", flow::INDEX_KEYWORD_ARRAY); }),
                       "declare it dex::Attribute<std::vector<std::string>>"));
  // One string is one keyword.
  EXPECT_EQ(thrown([] { Attribute<std::string>("tag", flow::INDEX_KEYWORD_ARRAY); }), "");
}

class Indexed final : public Flow {
 public:
  explicit Indexed(std::vector<AttributeDef> attributes) : attributes_(std::move(attributes)) {}
  std::string type() const override { return "Indexed"; }
  std::string start_step() const override { return "S"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {}; }
  std::vector<AttributeDef> attributes() const override { return attributes_; }

 private:
  std::vector<AttributeDef> attributes_;
};

TEST(IndexDeclarations, ValidateRefusesTwoAttributesWithOneIndexKeyAndTooManyIndexes) {
  const Attribute<std::string> a{"a", {flow::INDEX_KEYWORD, "Who"}};
  const Attribute<std::string> b{"b", {flow::INDEX_FULL_TEXT, "Who"}};
  const Attribute<std::string> c{"c", flow::INDEX_KEYWORD};
  EXPECT_TRUE(Indexed({a, c}).validate().is_ok());
  const Status twice = Indexed({a, c, b}).validate();
  EXPECT_EQ(twice.message(),
            "Flow type 'Indexed' gives Attributes 'a' and 'b' the same index key 'Who'");
  // An index key may be another Attribute's plain key: keys and index keys differ.
  EXPECT_TRUE(Indexed({Attribute<std::string>("x", {flow::INDEX_KEYWORD, "c"}),
                       Attribute<std::string>("c")})
                  .validate()
                  .is_ok());

  std::vector<AttributeDef> many;
  for (int i = 0; i < 65; ++i)
    many.push_back(Attribute<int64_t>("n" + std::to_string(i), flow::INDEX_INT));
  EXPECT_EQ(Indexed(many).validate().message(),
            "Flow type 'Indexed' declares 65 indexed Attributes; the limit is 64");
  many.pop_back();
  EXPECT_TRUE(Indexed(many).validate().is_ok());
  // The declaration carries every index.
  const flow::FlowDeclaration d = Indexed({a, c}).declaration();
  ASSERT_EQ(d.attributes_size(), 2);
  EXPECT_EQ(d.attributes(0).index().index_key(), "Who");
  EXPECT_EQ(d.attributes(1).index().type(), flow::INDEX_KEYWORD);
}

// ---------------------------------------------------------------- search rows

flow::SearchField field(const std::string& key, flow::IndexType type) {
  flow::SearchField f;
  f.set_key(key);
  f.set_type(type);
  return f;
}

TEST(SearchRows, AnIndexedAttributeReadsItsValueFromARowByItsIndexKey) {
  const Attribute<std::string> customer{"customer", flow::INDEX_KEYWORD};
  const Attribute<int64_t> items{"items", flow::INDEX_INT};
  const Attribute<int64_t> weight{"weight", flow::INDEX_DOUBLE};
  const Attribute<double> total{"total", {flow::INDEX_DOUBLE, "Total"}};
  const Attribute<bool> vip{"vip", flow::INDEX_BOOL};
  const Attribute<DateTime> placed{"placed", flow::INDEX_DATETIME};
  const Attribute<std::vector<std::string>> tags{"tags", flow::INDEX_KEYWORD_ARRAY};
  const Attribute<std::string> words{"words", flow::INDEX_FULL_TEXT};
  const Attribute<std::string> note{"note"};

  flow::FlowSearchRow row;
  auto* f = row.add_fields();
  *f = field("customer", flow::INDEX_KEYWORD);
  f->set_text("ann");
  *(f = row.add_fields()) = field("items", flow::INDEX_INT);
  f->set_int_value(3);
  *(f = row.add_fields()) = field("weight", flow::INDEX_DOUBLE);
  f->set_double_value(7);
  *(f = row.add_fields()) = field("Total", flow::INDEX_DOUBLE);
  f->set_double_value(31.5);
  *(f = row.add_fields()) = field("vip", flow::INDEX_BOOL);
  f->set_bool_value(true);
  *(f = row.add_fields()) = field("placed", flow::INDEX_DATETIME);
  f->set_time_ms(1'800'000'000'000);
  *(f = row.add_fields()) = field("tags", flow::INDEX_KEYWORD_ARRAY);
  f->add_items("eu");
  f->add_items("vip");
  *(f = row.add_fields()) = field("words", flow::INDEX_FULL_TEXT);
  f->set_text("Late Delivery");
  f->add_items("late");
  f->add_items("delivery");

  EXPECT_EQ(customer.get(row), std::optional<std::string>("ann"));
  EXPECT_EQ(items.get(row), std::optional<int64_t>(3));
  EXPECT_EQ(weight.get(row), std::optional<int64_t>(7));
  EXPECT_EQ(total.get(row), std::optional<double>(31.5));
  EXPECT_EQ(vip.get(row), std::optional<bool>(true));
  EXPECT_EQ(placed.get(row), std::optional<DateTime>(DateTime::from_unix_ms(1'800'000'000'000)));
  EXPECT_EQ(tags.get(row), (std::optional<std::vector<std::string>>({"eu", "vip"})));
  EXPECT_EQ(words.get(row), std::optional<std::string>("Late Delivery"));
  EXPECT_EQ(Attribute<std::string>("other", flow::INDEX_KEYWORD).get(row), std::nullopt);
  EXPECT_EQ(thrown([&] { (void)note.get(row); }),
            "string Attribute 'note' is not indexed: search rows carry only indexed Attributes");
}

// ------------------------------------------------------------ the fake server

flow::FlowSearchRow row_of(int i) {
  flow::FlowSearchRow r;
  r.set_flow_id("f-" + std::to_string(i));
  r.set_run_id("r-" + std::to_string(i));
  r.set_flow_type("Order");
  r.set_status(flow::FLOW_RUNNING);
  r.set_start_unix_ms(1'800'000'000'000 - i);
  return r;
}

class SearchClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<flow::FlowSearchRow> rows;
    for (int i = 1; i <= 7; ++i) rows.push_back(row_of(i));
    flows_.set_search_rows(rows);
    ClientOptions options;
    options.server_address = server_.address();
    options.timeout = kWait;
    client_ = std::make_unique<Client>(options);
  }
  FakeWorkerTaskService workers_;
  FakeFlowService flows_;
  FakeAdminService admin_;
  FakeServer server_{workers_, flows_, admin_};
  std::unique_ptr<Client> client_;
};

std::vector<std::string> flow_ids(const flow::SearchFlowsResponse& page) {
  std::vector<std::string> out;
  for (const auto& r : page.rows()) out.push_back(r.flow_id());
  return out;
}

TEST_F(SearchClientTest, SearchFlowsSendsTheQueryAndItsOptionsAndAnswersOnePage) {
  SearchOptions options;
  options.page_size = 3;
  options.fields = {"customer", "Total"};
  auto page = client_->search_flows("customer = 'ann'", options);
  ASSERT_TRUE(page.is_ok()) << page.status().message();
  EXPECT_EQ(flow_ids(*page), (std::vector<std::string>{"f-1", "f-2", "f-3"}));
  EXPECT_EQ(page->next_page_token(), "at:3");
  EXPECT_EQ(page->applied_slot(), 42u);
  const auto sent = flows_.searches();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].query(), "customer = 'ann'");
  EXPECT_EQ(sent[0].page_size(), 3);
  EXPECT_EQ(sent[0].page_token(), "");
  EXPECT_EQ(std::vector<std::string>(sent[0].fields().begin(), sent[0].fields().end()),
            (std::vector<std::string>{"customer", "Total"}));

  options.page_token = page->next_page_token();
  auto next = client_->search_flows("customer = 'ann'", options);
  ASSERT_TRUE(next.is_ok());
  EXPECT_EQ(flow_ids(*next), (std::vector<std::string>{"f-4", "f-5", "f-6"}));
}

TEST_F(SearchClientTest, ABadQueryIsInvalidArgumentNamingItsPosition) {
  auto page = client_->search_flows("Nope = 1");
  ASSERT_FALSE(page.is_ok());
  EXPECT_EQ(page.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(page.status().message(),
                       "INVALID_ARGUMENT: query: at position 1: unknown field 'Nope'"))
      << page.status().message();
}

TEST_F(SearchClientTest, SearchPagesFetchesEveryPageInOrderOnlyAsTheLoopReachesIt) {
  SearchOptions options;
  options.page_size = 3;
  SearchPages pages = client_->search_pages("Status = 'RUNNING'", options);
  EXPECT_EQ(flows_.searches().size(), 0u) << "nothing is fetched before the loop starts";
  std::vector<std::string> seen;
  size_t n = 0;
  for (const auto& page : pages) {
    ++n;
    EXPECT_EQ(pages.pages_fetched(), n);
    ASSERT_TRUE(page.is_ok()) << page.status().message();
    for (const auto& id : flow_ids(*page)) seen.push_back(id);
  }
  EXPECT_EQ(n, 3u);  // 3 + 3 + 1
  EXPECT_EQ(seen, (std::vector<std::string>{"f-1", "f-2", "f-3", "f-4", "f-5", "f-6", "f-7"}));
  const auto sent = flows_.searches();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1].page_token(), "at:3");
  EXPECT_EQ(sent[2].page_token(), "at:6");
  EXPECT_EQ(sent[2].query(), "Status = 'RUNNING'");

  // Pulled by hand, from a token: the rest of the pages, then nothing.
  options.page_token = "at:5";
  SearchPages rest = client_->search_pages("Status = 'RUNNING'", options);
  auto first = rest.next();
  ASSERT_TRUE(first.has_value() && first->is_ok());
  EXPECT_EQ(flow_ids(**first), (std::vector<std::string>{"f-6", "f-7"}));
  EXPECT_FALSE(rest.next().has_value());
  EXPECT_EQ(rest.pages_fetched(), 1u);

  // A range of C++20: the standard algorithms take it.
  SearchPages all = client_->search_pages("", options);
  EXPECT_EQ(
      std::ranges::count_if(all, [](const auto& p) { return p.is_ok() && p->rows_size() > 0; }), 1);
}

TEST_F(SearchClientTest, AnErrorIsTheLastPage) {
  size_t n = 0;
  for (const auto& page : client_->search_pages("Nope")) {
    ++n;
    ASSERT_FALSE(page.is_ok());
    EXPECT_EQ(page.status().code(), Code::kInvalidArgument);
  }
  EXPECT_EQ(n, 1u);
  SearchOptions bad;
  bad.page_size = 5000;
  Status s = client_->for_each_flow(
      "", [](const flow::FlowSearchRow&) { return true; }, bad);
  EXPECT_TRUE(contains(s.message(), "page_size 5000")) << s.message();
}

TEST_F(SearchClientTest, ForEachFlowVisitsEveryRowUntilTheCallbackSaysStop) {
  SearchOptions options;
  options.page_size = 2;
  std::vector<std::string> all;
  ASSERT_TRUE(client_
                  ->for_each_flow(
                      "",
                      [&](const flow::FlowSearchRow& row) {
                        all.push_back(row.flow_id());
                        return true;
                      },
                      options)
                  .is_ok());
  EXPECT_EQ(all.size(), 7u);
  EXPECT_EQ(flows_.searches().size(), 4u);

  std::vector<std::string> some;
  ASSERT_TRUE(client_
                  ->for_each_flow(
                      "",
                      [&](const flow::FlowSearchRow& row) {
                        some.push_back(row.flow_id());
                        return some.size() < 3;
                      },
                      options)
                  .is_ok());
  EXPECT_EQ(some, (std::vector<std::string>{"f-1", "f-2", "f-3"}));
  EXPECT_EQ(flows_.searches().size(), 6u) << "no page is fetched past the stop";
}

// ---------------------------------------------------------------- end to end

// Flow type "Order": its Attributes are indexed, set by the start (initial
// Attributes); Hold waits for Channel "close", then tags the order "closed"
// and completes.
const Attribute<std::string> kCustomer{"customer", flow::INDEX_KEYWORD};
const Attribute<int64_t> kItems{"items", flow::INDEX_INT};
const Attribute<double> kTotal{"total", {flow::INDEX_DOUBLE, "Total"}};
const Attribute<DateTime> kPlaced{"placed", flow::INDEX_DATETIME};
const Attribute<std::vector<std::string>> kTags{"tags", flow::INDEX_KEYWORD_ARRAY};
const Attribute<std::string> kNote{"note"};
const Channel kClose{"close"};

class Order final : public Flow {
  class Hold final : public WaitingStep {
   public:
    std::string type() const override { return "Hold"; }
    AttributeReads attribute_reads() const override { return {kTags}; }
    Wait wait_for(Context&) override { return Wait::any_of({kClose.for_one()}); }
    StepDecision execute(Context& ctx) override {
      std::vector<std::string> tags = kTags.get(ctx).value_or(std::vector<std::string>{});
      tags.push_back("closed");
      kTags.set(ctx, tags);
      return StepDecision::graceful_complete(json::object());
    }
  };

 public:
  std::string type() const override { return "Order"; }
  std::string start_step() const override { return "Hold"; }
  std::vector<std::shared_ptr<Step>> steps() const override { return {std::make_shared<Hold>()}; }
  std::vector<Channel> channels() const override { return {kClose}; }
  std::vector<AttributeDef> attributes() const override {
    return {kCustomer, kItems, kTotal, kPlaced, kTags, kNote};
  }
};

constexpr int64_t kPlacedBase = 1'800'000'000'000;

std::unique_ptr<ApiProcess> start_api() {
  ApiServerOptions options;
  options.listen = "127.0.0.1:0";
  auto api = ApiProcess::start(options);
  if (!api.is_ok()) {
    ADD_FAILURE() << api.status().to_string();
    return nullptr;
  }
  return std::move(api).value();
}

std::string address_of(const ApiProcess& api) { return "127.0.0.1:" + std::to_string(api.port()); }

class SearchEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = start_api();
    b_ = start_api();
    ASSERT_TRUE(a_ && b_);
    b_->set_active(&node_.engine(), {"n1", Epoch(1), "p1"});  // a_ is a standby
    const std::vector<std::string> addresses = {address_of(*a_), address_of(*b_)};
    WorkerOptions wo;
    wo.server_addresses = addresses;
    wo.worker_id = "w-search";
    wo.shutdown_timeout = seconds(3);
    worker_ = std::make_unique<Worker>(wo);
    worker_->host(std::make_shared<Order>());
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
    ClientOptions co;
    co.server_addresses = addresses;
    co.timeout = kWait;
    client_ = std::make_unique<Client>(co);
    for (int i = 0; i < 500 && worker_->stats().streams_accepted == 0; ++i)
      std::this_thread::sleep_for(milliseconds(10));
    ASSERT_EQ(worker_->stats().streams_accepted, 1u);
  }
  void TearDown() override {
    if (worker_) {
      worker_->shutdown();
      EXPECT_EQ(run_.wait_for(kWait), std::future_status::ready);
    }
    for (auto* api : {&a_, &b_})
      if (*api) (*api)->shutdown(seconds(0));
  }
  // Orders o-1 .. o-n: customer ann (odd) or bob (even), i items, 10.5 * i
  // total, placed at kPlacedBase + i s, tagged "vip" when i is a multiple of 3.
  void start_orders(int n) {
    for (int i = 1; i <= n; ++i) {
      StartOptions start;
      start.initial(kCustomer, std::string(i % 2 == 1 ? "ann" : "bob"))
          .initial(kItems, int64_t{i})
          .initial(kTotal, 10.5 * i)
          .initial(kPlaced, DateTime::from_unix_ms(kPlacedBase + i * 1000))
          .initial(kTags, i % 3 == 0 ? std::vector<std::string>{"eu", "vip"}
                                     : std::vector<std::string>{"eu"});
      auto started = client_->start("Order", "o-" + std::to_string(i), json::object(), start);
      ASSERT_TRUE(started.is_ok()) << started.status().message();
    }
  }
  std::vector<std::string> find(const std::string& query) {
    std::vector<std::string> ids;
    Status s = client_->for_each_flow(query, [&](const flow::FlowSearchRow& row) {
      ids.push_back(row.flow_id());
      return true;
    });
    EXPECT_TRUE(s.is_ok()) << query << ": " << s.message();
    return ids;
  }

  NodeEngine node_;
  std::unique_ptr<ApiProcess> a_, b_;
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
  std::unique_ptr<Client> client_;
};

TEST_F(SearchEndToEnd, RunsAreFoundByTheirIndexedAttributesNewestFirst) {
  ASSERT_NO_FATAL_FAILURE(start_orders(6));
  EXPECT_EQ(find("customer = 'ann'"), (std::vector<std::string>{"o-5", "o-3", "o-1"}));
  EXPECT_EQ(find("items >= 3 AND Total < 50 ORDER BY items ASC"),
            (std::vector<std::string>{"o-3", "o-4"}));
  EXPECT_EQ(find("tags = 'vip'"), (std::vector<std::string>{"o-6", "o-3"}));
  EXPECT_EQ(find("placed BETWEEN '2027-01-15T08:00:02Z' AND " + std::to_string(kPlacedBase + 3000) +
                 " ORDER BY placed"),
            (std::vector<std::string>{"o-2", "o-3"}));
  EXPECT_EQ(find("FlowType = 'Order' AND customer STARTS_WITH 'b' AND NOT tags = 'vip'"),
            (std::vector<std::string>{"o-4", "o-2"}));

  // The rows carry the values asked for, read typed.
  SearchOptions options;
  options.fields = {"customer", "items", "Total", "placed", "tags"};
  auto page = client_->search_flows("FlowId = 'o-3'", options);
  ASSERT_TRUE(page.is_ok()) << page.status().message();
  ASSERT_EQ(page->rows_size(), 1);
  const flow::FlowSearchRow& row = page->rows(0);
  EXPECT_EQ(row.flow_type(), "Order");
  EXPECT_EQ(row.status(), flow::FLOW_RUNNING);
  EXPECT_GT(row.start_unix_ms(), 0);
  EXPECT_EQ(kCustomer.get(row), std::optional<std::string>("ann"));
  EXPECT_EQ(kItems.get(row), std::optional<int64_t>(3));
  EXPECT_EQ(kTotal.get(row), std::optional<double>(31.5));
  EXPECT_EQ(kPlaced.get(row), std::optional<DateTime>(DateTime::from_unix_ms(kPlacedBase + 3000)));
  EXPECT_EQ(kTags.get(row), (std::optional<std::vector<std::string>>({"eu", "vip"})));
  EXPECT_GT(page->applied_slot(), 0u);

  // A Step's write and the close change what the index finds.
  ASSERT_TRUE(client_->publish("o-3", "close", {json::object()}).is_ok());
  auto closed = client_->wait_for_flow("o-3", kWait);
  ASSERT_TRUE(closed.is_ok() && closed->closed());
  EXPECT_EQ(find("Status = 'COMPLETED'"), (std::vector<std::string>{"o-3"}));
  EXPECT_EQ(find("tags = 'closed'"), (std::vector<std::string>{"o-3"}));
  EXPECT_EQ(find("Status = 'RUNNING' AND customer = 'ann'"),
            (std::vector<std::string>{"o-5", "o-1"}));

  // A bad query names its position; a write the index cannot take names the Attribute.
  auto bad = client_->search_flows("customer = ");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(contains(bad.status().message(), "INVALID_ARGUMENT: query: at position"))
      << bad.status().message();
  auto unknown = client_->search_flows("colour = 'red'");
  ASSERT_FALSE(unknown.is_ok());
  EXPECT_TRUE(contains(unknown.status().message(), "colour")) << unknown.status().message();
}

// Query completion (docs/search.md, "Completing a query") through the client,
// from the engine's RocksDB snapshot; the standby (a_) answers UNAVAILABLE
// and the client asks the active process.
TEST_F(SearchEndToEnd, CompletionListsTheKeysInUseAndAKeywordKeysValuesByPrefix) {
  ASSERT_NO_FATAL_FAILURE(start_orders(6));
  auto keys = client_->list_search_keys();
  ASSERT_TRUE(keys.is_ok()) << keys.status().message();
  std::map<std::string, flow::SearchKeyInfo> by_name;
  for (const auto& k : keys->keys()) by_name[k.name()] = k;
  ASSERT_TRUE(by_name.count("customer") && by_name.count("Status") && by_name.count("tags"));
  EXPECT_TRUE(by_name["Status"].system());
  EXPECT_EQ(by_name["customer"].type(), flow::INDEX_KEYWORD);
  EXPECT_EQ(by_name["customer"].flow_types_size(), 1);
  EXPECT_EQ(by_name["customer"].flow_types(0), "Order");
  EXPECT_EQ(by_name.count("note"), 0u);  // not indexed
  EXPECT_GT(keys->applied_slot(), 0u);

  auto customers = client_->list_search_values("customer");
  ASSERT_TRUE(customers.is_ok()) << customers.status().message();
  EXPECT_EQ(std::vector<std::string>(customers->values().begin(), customers->values().end()),
            (std::vector<std::string>{"ann", "bob"}));
  EXPECT_FALSE(customers->truncated());
  auto b = client_->list_search_values("customer", "b");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(std::vector<std::string>(b->values().begin(), b->values().end()),
            std::vector<std::string>{"bob"});
  auto tags = client_->list_search_values("tags", "", 1);
  ASSERT_TRUE(tags.is_ok());
  EXPECT_EQ(std::vector<std::string>(tags->values().begin(), tags->values().end()),
            std::vector<std::string>{"eu"});
  EXPECT_TRUE(tags->truncated());
  auto ids = client_->list_search_values("FlowId", "o-", 3);
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(std::vector<std::string>(ids->values().begin(), ids->values().end()),
            (std::vector<std::string>{"o-1", "o-2", "o-3"}));

  auto items = client_->list_search_values("items");
  ASSERT_FALSE(items.is_ok());
  EXPECT_TRUE(contains(items.status().message(), "INVALID_ARGUMENT: key 'items' is INT"))
      << items.status().message();
}

TEST_F(SearchEndToEnd, PagesGoOnOnTheProcessThatTookOverFromTheOneThatAnsweredTheFirst) {
  ASSERT_NO_FATAL_FAILURE(start_orders(7));
  SearchOptions options;
  options.page_size = 3;
  SearchPages pages = client_->search_pages("FlowType = 'Order'", options);
  std::vector<std::string> ids;
  size_t n = 0;
  for (const auto& page : pages) {
    ASSERT_TRUE(page.is_ok()) << page.status().message();
    for (const auto& id : flow_ids(*page)) ids.push_back(id);
    EXPECT_GT(page->applied_slot(), 0u);
    if (++n == 1) {
      // The active process changes between two pages: b_ now answers
      // UNAVAILABLE, and the next page is asked of a_, with b_'s token.
      EXPECT_EQ(client_->preferred_address(), address_of(*b_));
      b_->set_inactive("stepped down");
      a_->set_active(&node_.engine(), {"n1", Epoch(1), "p1"});
    }
  }
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(ids, (std::vector<std::string>{"o-7", "o-6", "o-5", "o-4", "o-3", "o-2", "o-1"}));
  EXPECT_EQ(client_->preferred_address(), address_of(*a_));
}

}  // namespace
}  // namespace dex
