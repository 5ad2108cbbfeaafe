#include "flow/search_keys.h"

#include <bit>
#include <cstring>

namespace dex::flow::search_keys {

namespace {

constexpr char kSep = '\x1f';  // Flow IDs, run IDs and keys never hold control characters

void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {  // bounded by the value's length
    out.push_back(c);
    if (c == '\0') out.push_back('\xff');
  }
}

std::string tagged_string(char tag, std::string_view s, bool whole) {
  std::string out;
  out.reserve(s.size() + 3);
  out.push_back(tag);
  append_escaped(out, s);
  if (whole) out.append("\0\x01", 2);
  return out;
}

}  // namespace

std::string doc(std::string_view flow_id, std::string_view run_id) {
  std::string out(kDocPrefix);
  out.append(flow_id).push_back(kSep);
  out.append(run_id);
  return out;
}

std::string flow_docs(std::string_view flow_id) {
  std::string out(kDocPrefix);
  out.append(flow_id).push_back(kSep);
  return out;
}

std::string index_key(std::string_view key) {
  return std::string(kIndexKeyPrefix) + std::string(key);
}

std::string field(std::string_view key) {
  std::string out(kEntryPrefix);
  out.append(key).push_back(kSep);
  return out;
}

std::string keyword(std::string_view s) { return tagged_string(kKeywordTag, s, true); }
std::string keyword_prefix(std::string_view s) { return tagged_string(kKeywordTag, s, false); }
std::string token(std::string_view s) { return tagged_string(kTokenTag, s, true); }
std::string token_prefix(std::string_view s) { return tagged_string(kTokenTag, s, false); }

std::string sortable64(int64_t v) {
  uint64_t u = static_cast<uint64_t>(v) ^ (uint64_t{1} << 63);
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, u >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(u & 0xff);
  return out;
}

int64_t from_sortable64(std::string_view b) {
  uint64_t u = 0;
  for (size_t i = 0; i < 8 && i < b.size(); ++i) u = (u << 8) | static_cast<uint8_t>(b[i]);
  return static_cast<int64_t>(u ^ (uint64_t{1} << 63));
}

std::string integer(int64_t v) { return std::string(1, kIntTag) + sortable64(v); }
std::string time(int64_t unix_ms) { return std::string(1, kTimeTag) + sortable64(unix_ms); }
std::string boolean(bool v) { return std::string(1, kBoolTag) + (v ? "1" : "0"); }

std::string real(double v) {
  if (v == 0) v = 0;  // -0.0 sorts with 0.0
  uint64_t u = std::bit_cast<uint64_t>(v);
  // Negative numbers: every bit flipped (larger magnitude sorts first);
  // positive: the sign bit set (above every negative).
  u = (u & (uint64_t{1} << 63)) ? ~u : (u | (uint64_t{1} << 63));
  std::string out(9, '\0');
  out[0] = kRealTag;
  for (int i = 8; i >= 1; --i, u >>= 8) out[static_cast<size_t>(i)] = static_cast<char>(u & 0xff);
  return out;
}

std::string entry(std::string_view key, std::string_view value, int64_t start_ms,
                  std::string_view flow_id, std::string_view run_id) {
  std::string out = field(key);
  out.reserve(out.size() + value.size() + 8 + flow_id.size() + 1 + run_id.size() + 4);
  out.append(value);
  out.append(sortable64(start_ms));
  out.append(flow_id).push_back(kSep);
  out.append(run_id);
  // The IDs' lengths last, so the run is read from the end (the value and
  // the start bytes may hold any byte); they never decide the order, as the
  // separator and the IDs come first.
  for (size_t n : {flow_id.size(), run_id.size()}) {
    out.push_back(static_cast<char>((n >> 8) & 0xff));
    out.push_back(static_cast<char>(n & 0xff));
  }
  return out;
}

bool parse_entry(std::string_view k, EntryRun* out) {
  if (k.substr(0, kEntryPrefix.size()) != kEntryPrefix || k.size() < kEntryPrefix.size() + 12)
    return false;
  const auto len16 = [&](size_t at) {
    return (static_cast<size_t>(static_cast<uint8_t>(k[at])) << 8) |
           static_cast<uint8_t>(k[at + 1]);
  };
  const size_t run_len = len16(k.size() - 2), flow_len = len16(k.size() - 4);
  const size_t ids = flow_len + 1 + run_len + 4;
  if (k.size() < kEntryPrefix.size() + 8 + ids) return false;
  const size_t flow_at = k.size() - ids;
  if (k[flow_at + flow_len] != kSep) return false;
  out->flow_id = k.substr(flow_at, flow_len);
  out->run_id = k.substr(flow_at + flow_len + 1, run_len);
  out->start_ms = from_sortable64(k.substr(flow_at - 8, 8));
  return true;
}

bool parse_doc(std::string_view k, std::string_view* flow_id, std::string_view* run_id) {
  if (k.substr(0, kDocPrefix.size()) != kDocPrefix) return false;
  k.remove_prefix(kDocPrefix.size());
  const size_t sep = k.find(kSep);
  if (sep == std::string_view::npos) return false;
  *flow_id = k.substr(0, sep);
  *run_id = k.substr(sep + 1);
  return true;
}

}  // namespace dex::flow::search_keys
