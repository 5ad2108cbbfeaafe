#include "cli/token_flags.h"

#include <CLI/CLI.hpp>

#include <cstdlib>

#include "sdk/client.h"
#include "sdk/credentials.h"

namespace dex::cli {

void add_token_flags(CLI::App& app, TokenFlags& flags) {
  app.add_option("--token-file", flags.token_file,
                 "File holding the token sent as 'authorization: Bearer <token>' on every call "
                 "(its first non-empty line; never printed). A token of the role the command "
                 "needs: viewer to read, client to change Flows, admin for 'admin' "
                 "(docs/api.md, \"Access\"). Default $DEX_TOKEN_FILE")
      ->expected(1);
  app.add_option("--token", flags.token,
                 "The token itself (other users may see it in the process list: prefer "
                 "--token-file or $DEX_TOKEN). Default $DEX_TOKEN")
      ->expected(1);
}

Status apply_token_flags(const TokenFlags& flags, ClientOptions& options) {
  if (!flags.token.empty() && !flags.token_file.empty()) {
    return Status::invalid_argument("give --token or --token-file, not both");
  }
  options.token = flags.token;
  options.token_file = flags.token_file;
  // The file is read now, so that a bad one is a usage error before any call.
  std::string file = flags.token_file;
  std::string what = "--token-file";
  if (flags.token.empty() && file.empty() && std::getenv(kTokenEnv) == nullptr) {
    if (const char* env = std::getenv(kTokenFileEnv); env != nullptr && *env != '\0') {
      file = env;
      what = std::string("$") + kTokenFileEnv;
    }
  }
  if (file.empty()) return Status::ok();
  if (auto read = read_token_file(file); !read.is_ok()) {
    return Status::invalid_argument(what + ": " + read.status().message());
  }
  return Status::ok();
}

}  // namespace dex::cli
