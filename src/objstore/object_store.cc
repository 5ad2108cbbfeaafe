#include "objstore/object_store.h"

#include <openssl/evp.h>

#include <cassert>

#include <fmt/format.h>

namespace dex {

Status validate_key(std::string_view key) {
  if (key.empty()) return Status::permanent("invalid object key: empty");
  if (key.size() > 1024)
    return Status::permanent(fmt::format("invalid object key: {} bytes, at most 1024", key.size()));
  if (key.front() == '/' || key.back() == '/') {
    return Status::permanent(fmt::format("invalid object key '{}': starts or ends with '/'", key));
  }
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view segment = key.substr(start, end - start);
    if (segment.empty() || segment == "." || segment == "..") {
      return Status::permanent(
          fmt::format("invalid object key '{}': empty, '.' or '..' segment", key));
    }
    start = end + 1;
  }
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) {
      return Status::permanent(
          fmt::format("invalid object key '{}': only printable ASCII without spaces", key));
    }
  }
  return Status::ok();
}

std::string etag_of(std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(body.data(), body.size(), digest, &length, EVP_md5(), nullptr);
  std::string out = "\"";
  for (unsigned int i = 0; i < length; ++i) out += fmt::format("{:02x}", digest[i]);
  out += "\"";
  return out;
}

StatusOr<std::vector<std::string>> list_all(ObjectStore& store, std::string_view prefix,
                                            size_t keys_max, size_t page_keys_max) {
  assert(page_keys_max > 0);
  std::vector<std::string> keys;
  std::string after;
  while (true) {
    auto page = store.list(prefix, after, page_keys_max);
    if (!page.is_ok()) return page.status();
    for (auto& key : page->keys) keys.push_back(std::move(key));
    if (keys.size() > keys_max) {
      return Status::permanent(fmt::format("more than {} keys under '{}'", keys_max, prefix));
    }
    if (!page->truncated || keys.empty()) break;
    after = keys.back();
  }
  return keys;
}

}  // namespace dex
