#include "web/static_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

namespace dex::web {
namespace {

namespace fs = std::filesystem;

// Bundled files under /assets/ carry a content hash in their names: they
// never change, so a browser keeps them. Everything else is revalidated.
constexpr std::string_view kImmutable = "public, max-age=31536000, immutable";
constexpr std::string_view kNoCache = "no-cache";

struct TypeByExtension {
  std::string_view extension;
  std::string_view type;
};
constexpr TypeByExtension kTypes[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".json", "application/json"},
    {".map", "application/json"},
    {".webmanifest", "application/manifest+json"},
    {".woff2", "font/woff2"},
    {".woff", "font/woff"},
    {".txt", "text/plain; charset=utf-8"},
};

std::string html_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::optional<std::string> read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(out).str();
}

// A ".." segment, a backslash or a NUL: a path that could leave the directory.
bool unsafe(std::string_view path) {
  if (path.find('\\') != std::string_view::npos || path.find('\0') != std::string_view::npos) {
    return true;
  }
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    std::string_view segment = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (segment == "..") return true;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

}  // namespace

std::string_view content_type_for(std::string_view file_name) {
  for (const auto& t : kTypes) {
    if (file_name.ends_with(t.extension)) return t.type;
  }
  return "application/octet-stream";
}

std::string not_built_page(const fs::path& dir) {
  return fmt::format(
      "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>dex-web</title>"
      "</head>\n<body>\n<h1>dex-web's assets are not built</h1>\n"
      "<p>This server looked for them in <code>{}</code> and found no "
      "<code>index.html</code>.</p>\n"
      "<p>Build them with <code>scripts/build-web</code> (it copies them beside the binaries, "
      "into <code>&lt;build&gt;/share/dex-web</code>), or point the server at them with "
      "<code>--web-assets DIR</code> (<code>web.assets</code> in a config file), then reload "
      "this page.</p>\n"
      "<p>The JSON API works meanwhile: <code>POST /api/v1/dex.FlowService/SearchFlows</code> "
      "(docs/dex-web.md).</p>\n</body>\n</html>\n",
      html_escape(dir.empty() ? std::string("(no directory)") : dir.string()));
}

StaticFiles::StaticFiles(fs::path dir) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::path canonical = fs::canonical(dir_, ec);
  if (ec) return;
  dir_ = canonical;
  built_ = fs::is_regular_file(dir_ / "index.html", ec);
}

std::optional<fs::path> StaticFiles::resolve(std::string_view path) const {
  std::string_view rel = path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  if (rel.empty()) return std::nullopt;
  std::error_code ec;
  // Canonical, so that a symbolic link out of the directory is not followed.
  fs::path file = fs::weakly_canonical(dir_ / fs::path(std::string(rel)), ec);
  if (ec) return std::nullopt;
  auto [end, _] = std::mismatch(dir_.begin(), dir_.end(), file.begin(), file.end());
  if (end != dir_.end()) return std::nullopt;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  return file;
}

StaticReply StaticFiles::get(std::string_view path) const {
  StaticReply reply;
  if (unsafe(path)) {
    reply.http_status = 400;
    reply.content_type = "text/plain; charset=utf-8";
    reply.cache_control = std::string(kNoCache);
    reply.body = "a path may not contain '..' segments, backslashes or NUL\n";
    return reply;
  }
  if (!built_) {
    reply.content_type = std::string(content_type_for(".html"));
    reply.cache_control = std::string(kNoCache);
    reply.body = not_built_page(dir_);
    return reply;
  }
  std::optional<fs::path> file = resolve(path);
  const bool fallback = !file.has_value();
  if (fallback) file = dir_ / "index.html";
  std::optional<std::string> body = read_file(*file);
  if (!body) {
    reply.http_status = 500;
    reply.content_type = "text/plain; charset=utf-8";
    reply.cache_control = std::string(kNoCache);
    reply.body = "the file could not be read\n";
    return reply;
  }
  reply.body = std::move(*body);
  reply.content_type = std::string(content_type_for(file->filename().string()));
  reply.cache_control =
      std::string(!fallback && path.starts_with("/assets/") ? kImmutable : kNoCache);
  return reply;
}

}  // namespace dex::web
