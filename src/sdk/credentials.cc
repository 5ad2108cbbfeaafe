#include "sdk/credentials.h"

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace dex {

namespace {

// A token file is small (one token a line); anything larger is not one.
constexpr off_t kTokenFileBytesMax = 64 * 1024;

std::string stamp_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return fmt::format("{}:{}:{}.{}", st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

}  // namespace

StatusOr<std::string> read_token_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::invalid_argument(fmt::format("cannot read token file '{}'", path));
  }
  if (!S_ISREG(st.st_mode) || st.st_size > kTokenFileBytesMax) {
    return Status::invalid_argument(fmt::format(
        "'{}' is not a token file (a regular file of at most {} bytes)", path, kTokenFileBytesMax));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return Status::invalid_argument(fmt::format("cannot read token file '{}'", path));
  std::string line;
  while (std::getline(text, line)) {  // bounded by the file's size
    const size_t first = line.find_first_not_of(" \t\r\v\f");
    if (first == std::string::npos) continue;
    return line.substr(first, line.find_last_not_of(" \t\r\v\f") - first + 1);
  }
  return Status::invalid_argument(fmt::format("token file '{}' is empty", path));
}

namespace sdk_internal {

TokenSource::TokenSource(std::string token, std::string token_file)
    : token_(std::move(token)), file_(std::move(token_file)), what_("token_file") {
  if (!token_.empty()) {
    file_.clear();  // a token given wins
    return;
  }
  if (!file_.empty()) return;
  if (const char* env = std::getenv(kTokenEnv); env != nullptr && *env != '\0') {
    token_ = env;
    return;
  }
  if (const char* env = std::getenv(kTokenFileEnv); env != nullptr && *env != '\0') {
    file_ = env;
    what_ = fmt::format("${}", kTokenFileEnv);
  }
}

StatusOr<std::string> TokenSource::get() {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_.empty()) return token_;
  const TimePoint now = SystemClock::instance().now();
  if (read_once_ && now - checked_at_ < seconds(1)) return token_;
  checked_at_ = now;
  const std::string stamp = stamp_of(file_);
  if (read_once_ && stamp == stamp_) return token_;
  auto read = read_token_file(file_);
  if (!read.is_ok()) {
    if (!read_once_) {
      return Status::invalid_argument(fmt::format("{}: {}", what_, read.status().message()));
    }
    // Mid-rotation: keep sending the token read before.
    spdlog::warn("{}: {}; sending the token read before", what_, read.status().message());
    return token_;
  }
  token_ = std::move(read).value();
  stamp_ = stamp;
  read_once_ = true;
  return token_;
}

}  // namespace sdk_internal
}  // namespace dex
