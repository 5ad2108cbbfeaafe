// dexcli's credential flags (docs/cli.md, "Credentials"): --token-file and
// --token, sent as "authorization: Bearer <token>" on every call; without
// them $DEX_TOKEN or $DEX_TOKEN_FILE (sdk/credentials.h). The admin commands'
// --credential-file, when given, is sent on their calls instead.
#pragma once

#include <string>

#include "common/status.h"

namespace CLI {
class App;
}

namespace dex {
struct ClientOptions;
}

namespace dex::cli {

struct TokenFlags {
  std::string token;
  std::string token_file;
};

// Adds the flags to `app` (they apply to every command that calls a server).
void add_token_flags(CLI::App& app, TokenFlags& flags);

// Puts the flags into `options`, checking the token file (or
// $DEX_TOKEN_FILE) can be read: InvalidArgument naming the flag or variable
// and the file otherwise, never the token.
Status apply_token_flags(const TokenFlags& flags, ClientOptions& options);

}  // namespace dex::cli
