// dexcli's `flow search QUERY` and `flow list` (docs/cli.md, "Finding
// Flows"): SearchFlows from the command line. `flow list` writes its filters
// (--status, --type, --since, --until) as a query (list_query.h), newest
// first. One page, or every page with --all; a table by default, or JSON
// (--output json): one object per page, and with --all one row per line
// (JSON lines) as each page arrives, so that scripts can stream. And
// `flow search-keys`: what a query can name, or a KEYWORD key's values
// (ListSearchKeys, ListSearchValues).
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace dex {
class Client;
}

namespace dex::cli {

class SearchCommands {
 public:
  // Adds `search`, `list` and `search-keys` to the `flow` command.
  explicit SearchCommands(CLI::App& flow);
  ~SearchCommands();
  SearchCommands(const SearchCommands&) = delete;
  SearchCommands& operator=(const SearchCommands&) = delete;

  // True when the parsed command line names `flow search`, `flow list` or
  // `flow search-keys`.
  bool chosen() const;
  // Checks the flags before anything is sent: 0, or 2 after printing the error.
  int check();
  // Runs it; the process's exit code (1 when a call failed).
  int run(Client& client);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex::cli
