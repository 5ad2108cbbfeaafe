// The token a client or Worker sends as "authorization: Bearer <token>"
// (docs/api.md, "Access"): given in the options, read from a token file, or
// taken from the environment ($DEX_TOKEN, $DEX_TOKEN_FILE), in that order.
#pragma once

#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/status.h"

namespace dex {

// The environment variables every dex client reads when its options give no
// token: the token itself, or a file that holds it.
inline constexpr const char* kTokenEnv = "DEX_TOKEN";
inline constexpr const char* kTokenFileEnv = "DEX_TOKEN_FILE";

// A token file's token: its first non-empty line without surrounding
// whitespace (a server's token file may list a second one during a
// rotation). InvalidArgument naming the file when it cannot be read or holds
// no token; never its content.
StatusOr<std::string> read_token_file(const std::string& path);

namespace sdk_internal {

// Where one client's token comes from: `token`; else `token_file`; else
// $DEX_TOKEN; else $DEX_TOKEN_FILE; else none. A file is looked at again at
// most once a second and read again when it changed, so a rotated token is
// sent without a restart; a file that cannot be read after having been read
// keeps the token read before. Thread-safe.
class TokenSource {
 public:
  TokenSource(std::string token, std::string token_file);
  // The token to send (empty: none), or InvalidArgument naming the file (or
  // variable) that could not be used.
  StatusOr<std::string> get();

 private:
  std::mutex mu_;
  std::string token_;       // guarded by mu_: the given token, or the file's last good read
  std::string file_;        // constant after construction; empty: no file
  std::string what_;        // constant after construction: "token_file", "$DEX_TOKEN_FILE"
  std::string stamp_;       // guarded by mu_: the file's size and mtime when last read
  TimePoint checked_at_;    // guarded by mu_
  bool read_once_ = false;  // guarded by mu_
};

}  // namespace sdk_internal
}  // namespace dex
