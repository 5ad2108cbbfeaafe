// The planner: which index a query reads and how far (docs/search.md,
// "Plans"). Every plan yields the same rows, the filter's matches in the
// order's sort key after the page token; plans differ only in what they read.
#include "search/search.h"

#include <algorithm>
#include <set>

#include "common/invariant.h"
#include "flow/search_index.h"
#include "flow/search_keys.h"
#include "search/evaluate.h"
#include "search/filter.h"
#include "search/page_token.h"
#include "search/query.h"

namespace dex::search {

namespace {

namespace sk = flow::search_keys;

thread_local const char* g_last_plan = "";

// Entry keys [from, to) of one field's index.
struct Range {
  std::string from, to;
};

struct Access {
  const Filter* conjunct = nullptr;
  std::vector<Range> ranges;
  bool point = false;  // one exact value: its entries sort by start time
};

// Probing an access stops counting here: enough to tell selective from not.
constexpr size_t kProbeMax = 1000;

std::string encode(const FieldRef& f, const Typed& v, bool prefix) {
  switch (f.type) {
    case flow::INDEX_KEYWORD:
    case flow::INDEX_KEYWORD_ARRAY:
      return prefix ? sk::keyword_prefix(v.text) : sk::keyword(v.text);
    case flow::INDEX_FULL_TEXT: {
      if (prefix) return sk::token_prefix(v.words.front());
      // The longest word: likely the rarest.
      auto longest =
          std::max_element(v.words.begin(), v.words.end(),
                           [](const auto& a, const auto& b) { return a.size() < b.size(); });
      return sk::token(*longest);
    }
    case flow::INDEX_INT:
      return sk::integer(v.i);
    case flow::INDEX_DOUBLE:
      return sk::real(v.d);
    case flow::INDEX_BOOL:
      return sk::boolean(v.i != 0);
    case flow::INDEX_DATETIME:
      return sk::time(v.i);
    default:
      return "";
  }
}

char tag(flow::IndexType t) {
  switch (t) {
    case flow::INDEX_INT:
      return sk::kIntTag;
    case flow::INDEX_DOUBLE:
      return sk::kRealTag;
    case flow::INDEX_DATETIME:
      return sk::kTimeTag;
    default:
      return sk::kKeywordTag;
  }
}

Range point(const std::string& field, const std::string& value) {
  return {field + value, prefix_end(field + value)};
}

// The index ranges a top-level conjunct selects; nullopt when it cannot use
// the index (a negation, !=, a field without entries).
std::optional<Access> access_for(const Filter& f) {
  if (!f.field.indexed || f.negated) return std::nullopt;
  const std::string field = sk::field(f.field.key);
  const std::string all(field + tag(f.field.type));
  Access a{&f, {}, false};
  switch (f.kind) {
    case Expr::Kind::kCompare: {
      const std::string v = field + encode(f.field, f.values[0], false);
      switch (f.op) {
        case CompareOp::kEq:
          a.ranges.push_back(point(field, encode(f.field, f.values[0], false)));
          a.point = true;
          break;
        case CompareOp::kLt:
          a.ranges.push_back({all, v});
          break;
        case CompareOp::kLe:
          a.ranges.push_back({all, prefix_end(v)});
          break;
        case CompareOp::kGt:
          a.ranges.push_back({prefix_end(v), prefix_end(all)});
          break;
        case CompareOp::kGe:
          a.ranges.push_back({v, prefix_end(all)});
          break;
        default:
          return std::nullopt;
      }
      return a;
    }
    case Expr::Kind::kIn: {
      std::set<std::string> values;
      for (const auto& v : f.values)
        values.insert(encode(f.field, v, false));  // bounded by kInValuesMax
      for (const auto& v : values) a.ranges.push_back(point(field, v));
      a.point = a.ranges.size() == 1;
      return a;
    }
    case Expr::Kind::kBetween:
      a.ranges.push_back({field + encode(f.field, f.values[0], false),
                          prefix_end(field + encode(f.field, f.values[1], false))});
      return a;
    case Expr::Kind::kStartsWith:
      a.ranges.push_back(point(field, encode(f.field, f.values[0], true)));
      return a;
    default:
      return std::nullopt;
  }
}

std::vector<const Filter*> conjuncts(const std::optional<Filter>& f) {
  std::vector<const Filter*> out;
  if (!f) return out;
  if (f->kind != Expr::Kind::kAnd) {
    out.push_back(&*f);
    return out;
  }
  for (const auto& c : f->children) out.push_back(&c);  // bounded by kPredicatesMax
  return out;
}

// Entries in `ranges`, counted up to `limit`.
size_t probe(IndexReader& r, const std::vector<Range>& ranges, size_t limit) {
  size_t n = 0;
  for (const auto& range : ranges) {  // bounded by kInValuesMax
    r.scan(range.from, range.to, false,
           [&](std::string_view, std::string_view) { return ++n < limit; });
    if (n >= limit) break;
  }
  return n;
}

// Collects the page: matches of the filter after the token, at most `want`,
// the smallest sort keys (largest when descending).
class Collector {
 public:
  Collector(const CompiledQuery& q, const std::optional<std::string>& after, size_t want)
      : q_(q), after_(after), want_(want) {}

  // Offers a run; false once a streaming plan may stop.
  bool offer(flow::SearchDoc doc, bool streaming) {
    if (q_.filter && !matches(*q_.filter, doc)) return true;
    std::string key = sort_key(q_.order, doc);
    if (after_ && (q_.order.descending ? key >= *after_ : key <= *after_)) return true;
    rows_.push_back({std::move(key), std::move(doc)});
    if (streaming) return rows_.size() < want_;
    if (rows_.size() >= 2 * want_ + 64) trim();  // bounded memory: keep the best `want`
    return true;
  }

  bool offer_key(IndexReader& r, std::string_view flow_id, std::string_view run_id,
                 bool streaming) {
    auto bytes = r.get(sk::doc(flow_id, run_id));
    flow::SearchDoc doc;
    if (!bytes || !doc.ParseFromString(*bytes)) return true;  // an entry without its doc: none
    return offer(std::move(doc), streaming);
  }

  std::vector<std::pair<std::string, flow::SearchDoc>> take() {
    trim();
    return std::move(rows_);
  }

 private:
  void trim() {
    const bool desc = q_.order.descending;
    std::sort(rows_.begin(), rows_.end(), [desc](const auto& a, const auto& b) {
      return desc ? a.first > b.first : a.first < b.first;
    });
    if (rows_.size() > want_) rows_.resize(want_);
  }

  const CompiledQuery& q_;
  const std::optional<std::string>& after_;
  size_t want_;
  std::vector<std::pair<std::string, flow::SearchDoc>> rows_;
};

bool start_time_order(const CompiledQuery& q) { return q.order.field.key == flow::kStartTimeField; }

// Streams the entries of `range` in the order's direction from the token on.
// `seek`: the token row's entry in the range (a streamed page starts after it).
void stream(IndexReader& r, Range range, const std::optional<std::string>& seek, bool desc,
            Collector& c) {
  if (seek) {
    if (desc)
      range.to = std::min(range.to, *seek);
    else
      range.from = std::max(range.from, *seek);
  }
  if (range.from >= range.to) return;
  r.scan(range.from, range.to, desc, [&](std::string_view key, std::string_view) {
    sk::EntryRun run;
    if (!sk::parse_entry(key, &run)) return true;
    return c.offer_key(r, run.flow_id, run.run_id, true);
  });
}

// Reads candidates off `ranges`; false when there are more than kCandidatesMax.
bool candidates(IndexReader& r, const std::vector<Range>& ranges, Collector& c) {
  std::set<std::pair<std::string, std::string>> runs;
  bool over = false;
  for (const auto& range : ranges) {  // bounded by kInValuesMax
    r.scan(range.from, range.to, false, [&](std::string_view key, std::string_view) {
      sk::EntryRun run;
      if (sk::parse_entry(key, &run)) runs.emplace(run.flow_id, run.run_id);
      over = runs.size() > kCandidatesMax;
      return !over;
    });
    if (over) return false;
  }
  for (const auto& [flow_id, run_id] : runs)
    c.offer_key(r, flow_id, run_id, false);  // bounded by kCandidatesMax
  return true;
}

void full_scan(IndexReader& r, Collector& c) {
  const std::string prefix(sk::kDocPrefix);
  r.scan(prefix, prefix_end(prefix), false, [&](std::string_view, std::string_view value) {
    flow::SearchDoc doc;
    if (doc.ParseFromArray(value.data(), static_cast<int>(value.size())))
      c.offer(std::move(doc), false);
    return true;
  });
}

// The FlowId = / IN conjunct's values, if the query has one.
const Filter* flow_id_conjunct(const std::vector<const Filter*>& conj) {
  for (const auto* f : conj)  // bounded by kPredicatesMax
    if (f->field.key == flow::kFlowIdField && !f->negated &&
        ((f->kind == Expr::Kind::kCompare && f->op == CompareOp::kEq) ||
         f->kind == Expr::Kind::kIn))
      return f;
  return nullptr;
}

// Runs the cheapest plan into `c`.
void run_plan(IndexReader& r, const CompiledQuery& q, const std::optional<std::string>& after,
              Collector& c) {
  const auto conj = conjuncts(q.filter);
  if (const Filter* ids = flow_id_conjunct(conj)) {
    g_last_plan = "flow-id";
    std::set<std::string> seen;
    for (const auto& v : ids->values) {  // bounded by kInValuesMax
      if (!seen.insert(v.text).second) continue;
      const std::string prefix = sk::flow_docs(v.text);
      r.scan(prefix, prefix_end(prefix), false, [&](std::string_view, std::string_view value) {
        flow::SearchDoc doc;
        if (doc.ParseFromArray(value.data(), static_cast<int>(value.size())))
          c.offer(std::move(doc), false);
        return true;
      });
    }
    return;
  }
  std::optional<Access> best;
  size_t best_count = SIZE_MAX;
  for (const auto* f : conj) {  // bounded by kPredicatesMax
    auto a = access_for(*f);
    if (!a) continue;
    const size_t n = probe(r, a->ranges, kProbeMax + 1);
    if (n < best_count || (n == best_count && a->point && !best->point)) {
      best = std::move(a);
      best_count = n;
    }
  }
  const bool desc = q.order.descending;
  const bool by_start = start_time_order(q);
  // The entry of the token's row under a range's own prefix (start-time order).
  const auto seek = [&](const std::string& prefix,
                        size_t value_bytes) -> std::optional<std::string> {
    if (!after) return std::nullopt;
    return prefix + after->substr(1 + value_bytes);
  };
  if (best && by_start && best->point) {
    g_last_plan = "point-stream";
    const Range& range = best->ranges.front();
    stream(r, range, seek(range.from, 9), desc, c);  // 9: the sort key's time(start)
    return;
  }
  const std::string start_field = sk::field(flow::kStartTimeField);
  // One StartTime range streams in order; an IN of several instants does not.
  if (best && by_start && best->conjunct->field.key == flow::kStartTimeField &&
      best->ranges.size() == 1) {
    g_last_plan = "start-time";
    stream(r, best->ranges.front(), seek(start_field, 0), desc, c);
    return;
  }
  if (best && (best_count <= kProbeMax || !by_start) && candidates(r, best->ranges, c)) {
    g_last_plan = "candidates";
    return;
  }
  if (by_start) {
    g_last_plan = "start-time";
    const std::string all = start_field + sk::kTimeTag;
    stream(r, {all, prefix_end(all)}, seek(start_field, 0), desc, c);
    return;
  }
  g_last_plan = "full-scan";
  full_scan(r, c);
}

flow::FlowSearchRow row_of(const flow::SearchDoc& d, const std::vector<FieldRef>& shown) {
  flow::FlowSearchRow row;
  row.set_flow_id(d.flow_id());
  row.set_run_id(d.run_id());
  row.set_flow_type(d.flow_type());
  row.set_status(d.status());
  row.set_start_unix_ms(d.start_ms());
  row.set_close_unix_ms(d.close_ms());
  row.set_parent_flow_id(d.parent_flow_id());
  for (const auto& f : shown)  // bounded by the fields named and asked for
    if (auto v = field_value(d, f)) *row.add_fields() = std::move(*v);
  return row;
}

// The fields each row carries besides its columns: those the query names and
// those asked for, in key order.
StatusOr<std::vector<FieldRef>> shown_fields(IndexReader& r, const CompiledQuery& q,
                                             const flow::SearchFlowsRequest& req) {
  std::set<std::string> keys(q.named.begin(), q.named.end());
  if (req.fields_size() > 100)
    return Status::invalid_argument("fields: at most 100 may be asked for");
  for (const auto& k : req.fields()) keys.insert(k);
  std::vector<FieldRef> out;
  for (const auto& k : keys) {  // bounded by the named and asked fields
    if (const auto* s = flow::find_system_field(k)) {
      out.push_back({k, s->type, true, s->indexed});
      continue;
    }
    auto bytes = r.get(sk::index_key(k));
    flow::IndexKeyEntry entry;
    if (!bytes || !entry.ParseFromString(*bytes))
      return Status::invalid_argument("fields: " + k +
                                      " is neither a system field nor an index key in use");
    out.push_back({k, entry.type(), false, true});
  }
  return out;
}

}  // namespace

const char* last_plan() { return g_last_plan; }

StatusOr<flow::SearchFlowsResponse> search_flows(IndexReader& r,
                                                 const flow::SearchFlowsRequest& req) {
  if (req.page_size() < 0 || req.page_size() > kPageSizeMax)
    return Status::invalid_argument("page_size " + std::to_string(req.page_size()) +
                                    " is not within 0.." + std::to_string(kPageSizeMax));
  const size_t page =
      static_cast<size_t>(req.page_size() == 0 ? kPageSizeDefault : req.page_size());
  auto parsed = parse_query(req.query());
  if (!parsed.is_ok()) return parsed.status();
  auto q = compile(*parsed, r);
  if (!q.is_ok()) return q.status();
  auto shown = shown_fields(r, *q, req);
  if (!shown.is_ok()) return shown.status();
  std::optional<std::string> after;
  if (!req.page_token().empty()) {
    auto key = decode_page_token(req.page_token(), req.query());
    if (!key.is_ok()) return key.status();
    after = *std::move(key);
  }
  Collector c(*q, after, page + 1);
  run_plan(r, *q, after, c);
  auto rows = c.take();
  flow::SearchFlowsResponse out;
  const size_t n = std::min(rows.size(), page);
  for (size_t i = 0; i < n; ++i)
    *out.add_rows() = row_of(rows[i].second, *shown);  // bounded by the page
  if (rows.size() > page)
    out.set_next_page_token(encode_page_token(rows[n - 1].first, req.query()));
  return out;
}

}  // namespace dex::search
