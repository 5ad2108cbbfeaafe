// dexcli's `flow config` (docs/flow-rules.md, "FlowConfig"): changes a
// running run's FlowConfig field by field (UpdateFlowConfig), named by its
// exact run ID; `flow state` shows the effective config.
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace dex {
class Client;
}

namespace dex::cli {

class FlowConfigCommand {
 public:
  // Adds `config` to the `flow` command.
  explicit FlowConfigCommand(CLI::App& flow);
  ~FlowConfigCommand();
  FlowConfigCommand(const FlowConfigCommand&) = delete;
  FlowConfigCommand& operator=(const FlowConfigCommand&) = delete;

  bool chosen() const;
  // Checks the flags before anything is sent: 0, or 2 after printing the error.
  int check();
  // Runs it; the process's exit code (1 when the call failed).
  int run(Client& client);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dex::cli
