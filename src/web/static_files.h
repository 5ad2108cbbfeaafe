// The app's files (docs/dex-web.md, "How it is served"): the built assets of
// web/ (scripts/build-web), read from one directory. A path names a file of
// that directory or gets index.html (the app's own routes); nothing outside
// the directory is ever read. Without built assets a short built-in page says
// how to build them. Stateless; thread-safe.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace dex::web {

// What answers a GET of the app.
struct StaticReply {
  int http_status = 200;
  std::string content_type;
  std::string cache_control;
  std::string body;
};

// "text/html; charset=utf-8", "text/javascript; charset=utf-8", ... by the
// file name's extension; application/octet-stream for one not known.
std::string_view content_type_for(std::string_view file_name);

// The assets of one directory. An empty path or a directory without
// index.html: not built (every path answers the built-in page).
class StaticFiles {
 public:
  explicit StaticFiles(std::filesystem::path dir);

  bool built() const { return built_; }
  const std::filesystem::path& dir() const { return dir_; }

  // The answer to GET `path` (URL-decoded, starting with '/'): the file
  // under the directory when one matches (hashed files under /assets/ cached
  // for a year, the rest no-cache), else index.html (no-cache). A path with a
  // ".." segment, a backslash or a NUL is refused with 400.
  StaticReply get(std::string_view path) const;

 private:
  // The file `path` names inside the directory, if it is a regular file there.
  std::optional<std::filesystem::path> resolve(std::string_view path) const;

  std::filesystem::path dir_;  // canonical when built_
  bool built_ = false;
};

// The page served when the assets are not built.
std::string not_built_page(const std::filesystem::path& dir);

}  // namespace dex::web
