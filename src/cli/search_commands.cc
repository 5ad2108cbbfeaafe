#include "cli/search_commands.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>

#include "cli/flow_errors.h"
#include "cli/list_query.h"
#include "cli/proto_json.h"
#include "cli/search_output.h"
#include "sdk/client.h"

namespace dex::cli {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A flag that takes one value per use, repeatable, and comma lists: a word
// after it stays a positional argument (the query), not another value.
CLI::Option* list_flag(CLI::App* cmd, const std::string& name, std::vector<std::string>& into,
                       const std::string& help) {
  return cmd->add_option(name, into, help)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->delimiter(',');
}

constexpr const char* kSearchHelp =
    "Find runs by a query over their system fields (FlowId, RunId, FlowType, Status, StartTime, "
    "CloseTime, ExecutionDuration, ParentFlowId, ActiveStepTypes) and the Attributes their Flow "
    "types index (docs/search.md): =, !=, <, <=, >, >=, IN (...), NOT IN, BETWEEN a AND b, "
    "STARTS_WITH, IS [NOT] NULL, AND, OR, NOT, parentheses, then ORDER BY field [ASC|DESC] "
    "(default StartTime DESC: newest first). Strings in single quotes; times as RFC 3339 "
    "strings or Unix ms. An empty query selects every run. Prints one page (--page-size, default "
    "100) unless --all. A bad query exits 1 with INVALID_ARGUMENT naming its position";

constexpr const char* kSearchExamples =
    "Examples:\n"
    "  dexcli flow search \"customer = 'acme' AND Status = 'RUNNING'\"\n"
    "  dexcli flow search \"total BETWEEN 10 AND 100 ORDER BY total DESC\" --fields customer\n"
    "  dexcli flow search \"ActiveStepTypes = 'Ship' AND StartTime < '2027-01-15T00:00:00Z'\"\n"
    "  dexcli flow search \"tags = 'gift'\" --all --output json | jq -r .flowId\n"
    "  dexcli flow search \"FlowType = 'OrderProcessing'\" --page-size 50 --output json\n"
    "      # then the same with --page-token <its nextPageToken> for the next page\n"
    "JSON: one object per page {query, rows, nextPageToken (\"\" on the last page), "
    "appliedSlot}; with --all, JSON lines: one row per line. A row: {flowId, runId, flowType, "
    "status, startUnixMs, closeUnixMs, parentFlowId, fields: {indexKey: value}}.";

constexpr const char* kListHelp =
    "List runs, newest first: a search whose query --status, --type, --since and --until write "
    "(printed as \"query\" in JSON). One page (--page-size, default 100) unless --all";

constexpr const char* kListExamples =
    "Examples:\n"
    "  dexcli flow list                                  # the 100 newest runs\n"
    "  dexcli flow list --status running --type OrderProcessing\n"
    "  dexcli flow list --status failed,timed-out --since 1h\n"
    "  dexcli flow list --since 2027-01-15T00:00:00Z --until 2027-01-16T00:00:00Z --all\n"
    "  dexcli flow list --all --output json | jq -r 'select(.status == \"FAILED\") | .flowId'";

constexpr const char* kKeysHelp =
    "What a query can name: the system fields, then the index keys in use, each with its index "
    "type, whether it can follow ORDER BY and the Flow types declaring it (ListSearchKeys). With "
    "--values KEY: the distinct values of a KEYWORD or KEYWORD_ARRAY field that start with "
    "--prefix, in byte order, at most --limit (ListSearchValues)";

constexpr const char* kKeysExamples =
    "Examples:\n"
    "  dexcli flow search-keys\n"
    "  dexcli flow search-keys --output json | jq -r '.keys[].name'\n"
    "  dexcli flow search-keys --values customer --prefix ac\n"
    "  dexcli flow search-keys --values FlowType\n"
    "JSON: {keys: [{name, type, system, sortable, flowTypes}], appliedSlot}; with --values: "
    "{values, truncated, appliedSlot}.";

// The table of ListSearchKeys: NAME TYPE ORDER BY FLOW TYPES.
std::string keys_table(const flow::ListSearchKeysResponse& keys) {
  std::vector<std::array<std::string, 4>> rows = {{"NAME", "TYPE", "ORDER BY", "FLOW TYPES"}};
  for (const auto& k : keys.keys()) {  // bounded by the answer (1,009 at most)
    std::string types;
    for (const auto& t : k.flow_types()) types += (types.empty() ? "" : ", ") + t;
    rows.push_back({k.name(), enum_value_text(*flow::IndexType_descriptor(), k.type()),
                    k.sortable() ? "yes" : "no", k.system() ? "(system field)" : types});
  }
  std::array<size_t, 4> width{};
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i)
      line += r[i] + (i + 1 < r.size() ? std::string(width[i] - r[i].size() + 2, ' ') : "");
    out += line + "\n";
  }
  return out;
}

}  // namespace

struct SearchCommands::Impl {
  CLI::App* search = nullptr;
  CLI::App* list = nullptr;
  CLI::App* keys = nullptr;  // flow search-keys
  std::string values_key, prefix;
  int limit = 0;

  std::string query;  // search's QUERY; list's, written by check()
  int page_size = 0;  // 0: the server's default (100)
  std::string page_token;
  bool all = false;
  std::string output = "table";
  std::vector<std::string> fields;
  std::vector<std::string> status_texts, flow_types;
  std::string since_text, until_text;

  std::string op() const {
    return keys->parsed() ? "flow search-keys" : list->parsed() ? "flow list" : "flow search";
  }
  int run_keys(Client& client) const;
  void add_common(CLI::App* cmd);
  int print_page(const flow::SearchFlowsResponse& page) const;
  int print_all(Client& client, SearchOptions options) const;
};

void SearchCommands::Impl::add_common(CLI::App* cmd) {
  cmd->add_option("--page-size", page_size, "Rows per page, 1 to 1000 (default: 100)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--page-token", page_token,
                  "Start after a page: the nextPageToken a JSON page printed (the same query)");
  cmd->add_flag("--all", all,
                "Every page, one call per page (with --output json: one row per line as each "
                "page arrives)");
  cmd->add_option("--output", output, "table (default, for people) or json (stable)")
      ->capture_default_str();
  list_flag(cmd, "--fields", fields,
            "Index keys (or system fields such as ExecutionDuration) whose values each row "
            "shows besides those the query names (comma list or repeated)");
}

SearchCommands::SearchCommands(CLI::App& flow) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.search = flow.add_subcommand("search", kSearchHelp);
  m.search->add_option("QUERY", m.query,
                       "The query, quoted for the shell (empty or left out: every run)");
  m.add_common(m.search);
  m.search->footer(kSearchExamples);

  m.list = flow.add_subcommand("list", kListHelp);
  list_flag(m.list, "--status", m.status_texts,
            "Only runs in these statuses: running, completed, failed, canceled, terminated, "
            "timed-out, continued-as-new (comma list or repeated)");
  list_flag(m.list, "--type", m.flow_types,
            "Only runs of these Flow types (comma list or repeated)");
  m.list->add_option("--since", m.since_text,
                     "Only runs started at or after this: a duration before now (30m, 1h, 7d), an "
                     "RFC 3339 time (2027-01-15T10:00:00Z) or Unix ms");
  m.list->add_option("--until", m.until_text, "Only runs started before this (as --since)");
  m.add_common(m.list);
  m.list->footer(kListExamples);

  m.keys = flow.add_subcommand("search-keys", kKeysHelp);
  m.keys->add_option("--values", m.values_key,
                     "List this KEYWORD or KEYWORD_ARRAY field's values instead of the keys");
  m.keys->add_option("--prefix", m.prefix, "With --values: only values that start with this");
  m.keys->add_option("--limit", m.limit, "With --values: at most this many, 1 to 100 (default 20)")
      ->check(CLI::Range(1, 100));
  m.keys->add_option("--output", m.output, "table (default, for people) or json (stable)")
      ->capture_default_str();
  m.keys->footer(kKeysExamples);
}

SearchCommands::~SearchCommands() = default;

bool SearchCommands::chosen() const {
  return impl_->search->parsed() || impl_->list->parsed() || impl_->keys->parsed();
}

int SearchCommands::check() {
  Impl& m = *impl_;
  const std::string op = m.op();
  if (m.output != "json" && m.output != "table")
    return usage_error(op, "--output must be table or json, not '" + m.output + "'");
  for (const auto& f : m.fields)  // bounded by the flags given
    if (f.empty()) return usage_error(op, "--fields: an index key is empty");
  if (m.keys->parsed()) {
    const bool values = m.keys->get_option("--values")->count() > 0;
    if (values && m.values_key.empty()) return usage_error(op, "--values: the key is empty");
    for (const char* flag : {"--prefix", "--limit"})
      if (!values && m.keys->get_option(flag)->count() > 0)
        return usage_error(op, std::string(flag) + " needs --values KEY");
    return 0;
  }
  if (!m.list->parsed()) return 0;
  ListFilter filter;
  for (const auto& s : m.status_texts) {  // bounded by the flags given
    auto status = status_literal(s);
    if (!status.is_ok()) return usage_error(op, "--status: " + status.status().message());
    filter.statuses.push_back(*status);
  }
  for (const auto& t : m.flow_types) {  // bounded by the flags given
    if (t.empty()) return usage_error(op, "--type: a Flow type is empty");
    filter.flow_types.push_back(t);
  }
  const int64_t now = now_ms();
  for (auto [flag, text, into] : {std::tuple{"--since", &m.since_text, &filter.since_unix_ms},
                                  {"--until", &m.until_text, &filter.until_unix_ms}}) {
    if (m.list->get_option(flag)->count() == 0) continue;
    auto t = parse_time_bound(*text, now);
    if (!t.is_ok()) return usage_error(op, std::string(flag) + ": " + t.status().message());
    *into = *t;
  }
  if (filter.since_unix_ms && filter.until_unix_ms &&
      *filter.since_unix_ms >= *filter.until_unix_ms) {
    return usage_error(op, "--since " + m.since_text + " is not before --until " + m.until_text +
                               ": no run can match");
  }
  m.query = list_query(filter);
  return 0;
}

int SearchCommands::Impl::print_page(const flow::SearchFlowsResponse& page) const {
  if (output == "json") {
    std::cout << json_text(search_page_json(query, page), 2) << "\n";
    return 0;
  }
  std::cout << search_table({page.rows().begin(), page.rows().end()}, now_ms());
  if (!page.next_page_token().empty()) {
    std::cout << "\n"
              << page.rows_size() << " runs; more with --page-token " << page.next_page_token()
              << " (or --all)\n";
  }
  return 0;
}

int SearchCommands::Impl::print_all(Client& client, SearchOptions options) const {
  std::vector<flow::FlowSearchRow> rows;  // the table's; JSON lines go out page by page
  // Bounded by the runs the query selects: each page moves the cursor on.
  for (const auto& page : client.search_pages(query, std::move(options))) {
    if (!page.is_ok()) return request_error(op(), page.status());
    for (const auto& r : page->rows()) {
      if (output == "json")
        std::cout << json_text(search_row_json(r)) << "\n";
      else
        rows.push_back(r);
    }
    std::cout.flush();
  }
  if (output == "table") {
    std::cout << search_table(rows, now_ms());
    if (!rows.empty()) std::cout << "\n" << rows.size() << " runs\n";
  }
  return 0;
}

int SearchCommands::Impl::run_keys(Client& client) const {
  if (keys->get_option("--values")->count() > 0) {
    auto values = client.list_search_values(values_key, prefix, limit);
    if (!values.is_ok()) return request_error(op(), values.status());
    if (output == "json") {
      std::cout << json_text(proto_to_json(*values), 2) << "\n";
      return 0;
    }
    for (const auto& v : values->values()) std::cout << v << "\n";
    if (values->truncated())
      std::cout << "\n(more values follow: a longer --prefix, or --limit up to 100)\n";
    return 0;
  }
  auto found = client.list_search_keys();
  if (!found.is_ok()) return request_error(op(), found.status());
  if (output == "json") {
    std::cout << json_text(proto_to_json(*found), 2) << "\n";
    return 0;
  }
  std::cout << keys_table(*found);
  if (found->truncated()) std::cout << "\n(more index keys than one answer lists)\n";
  return 0;
}

int SearchCommands::run(Client& client) {
  Impl& m = *impl_;
  if (m.keys->parsed()) return m.run_keys(client);
  SearchOptions options;
  options.page_size = m.page_size;
  options.page_token = m.page_token;
  options.fields = m.fields;
  if (m.all) return m.print_all(client, std::move(options));
  auto page = client.search_flows(m.query, options);
  if (!page.is_ok()) return request_error(m.op(), page.status());
  return m.print_page(*page);
}

}  // namespace dex::cli
