#include "attrstore/table_name.h"

#include <vector>

namespace dex::attrstore {
namespace {

// PostgreSQL's NAMEDATALEN - 1 (bytes); MySQL's identifier limit (characters).
constexpr size_t kPostgresNameBytesMax = 63;
constexpr size_t kMysqlNameCharsMax = 64;

size_t utf8_chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

char quote_char(StoreType type) { return type == StoreType::kPostgres ? '"' : '`'; }

Status bad(std::string_view text, std::string_view why) {
  return Status::invalid_argument("table name \"" + std::string(text) + "\": " + std::string(why));
}

// Splits `text` on dots outside quotes, unquoting quoted parts.
StatusOr<std::vector<std::string>> split_parts(std::string_view text, StoreType type) {
  const char q = quote_char(type);
  std::vector<std::string> parts(1);
  bool quoted_part = false;  // the current part was written quoted
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == q) {
      if (!parts.back().empty() || quoted_part) return bad(text, "a quote inside a name");
      size_t j = i + 1;
      std::string name;
      for (;; ++j) {
        if (j >= text.size()) return bad(text, "an unclosed quote");
        if (static_cast<unsigned char>(text[j]) < ' ') return bad(text, "a control character");
        if (text[j] != q) {
          name += text[j];
        } else if (j + 1 < text.size() && text[j + 1] == q) {
          name += q;
          ++j;
        } else {
          break;
        }
      }
      if (name.empty()) return bad(text, "an empty quoted name");
      parts.back() = std::move(name);
      quoted_part = true;
      i = j;
    } else if (c == '.') {
      if (parts.back().empty()) return bad(text, "an empty part");
      parts.emplace_back();
      quoted_part = false;
    } else if (quoted_part) {
      return bad(text, "text after a quoted name");
    } else if (static_cast<unsigned char>(c) <= ' ' || c == '"' || c == '`' || c == '\'') {
      return bad(text, "a space, control character or quote in an unquoted name (quote it)");
    } else {
      parts.back() += c;
    }
  }
  if (parts.back().empty()) return bad(text, "an empty part");
  return parts;
}

}  // namespace

std::string TableName::display() const { return schema.empty() ? table : schema + "." + table; }

StatusOr<TableName> parse_table_name(std::string_view text, StoreType type) {
  if (text.empty()) return Status::invalid_argument("table name is empty");
  auto parts = split_parts(text, type);
  if (!parts.is_ok()) return parts.status();
  if (parts->size() > 2) {
    return bad(text, type == StoreType::kPostgres ? "more than two parts (schema.table)"
                                                  : "more than two parts (database.table)");
  }
  for (const std::string& part : *parts) {
    if (type == StoreType::kPostgres && part.size() > kPostgresNameBytesMax) {
      return bad(text, "a name longer than PostgreSQL's 63 bytes");
    }
    if (type == StoreType::kMysql && utf8_chars(part) > kMysqlNameCharsMax) {
      return bad(text, "a name longer than MySQL's 64 characters");
    }
  }
  TableName name;
  if (parts->size() == 2) name.schema = (*parts)[0];
  name.table = parts->back();
  return name;
}

std::string quote_identifier(std::string_view name, StoreType type) {
  const char q = quote_char(type);
  std::string out(1, q);
  for (char c : name) {
    if (c == q) out += q;
    out += c;
  }
  out += q;
  return out;
}

std::string quoted_table(const TableName& name, StoreType type) {
  std::string table = quote_identifier(name.table, type);
  return name.schema.empty() ? table : quote_identifier(name.schema, type) + "." + table;
}

}  // namespace dex::attrstore
