// dexcli's `flow` commands over the dex Flow API (dex.FlowService):
// start, stop, publish, wait, describe, state, history, skip-timer, watch,
// attributes get|set, rpc, inspect, and search, list (search_commands.h).
// JSON on stdout (one shape per object: proto_json.h), `--output table` for
// people; errors as one JSON object on stderr. docs/cli.md has the reference.
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace dex {
struct ClientOptions;
}

namespace dex::cli {

class FlowCommands {
 public:
  // Adds the `flow` command and its subcommands to `app`.
  explicit FlowCommands(CLI::App& app);
  ~FlowCommands();
  FlowCommands(const FlowCommands&) = delete;
  FlowCommands& operator=(const FlowCommands&) = delete;

  // True when the parsed command line names a `flow` command.
  bool chosen() const;
  // Checks the flags and reads the input before anything is sent: 0, or 2
  // after printing the error (a usage error changes nothing).
  int check();
  // Runs the chosen command; the process's exit code.
  int run(const ClientOptions& options);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex::cli
