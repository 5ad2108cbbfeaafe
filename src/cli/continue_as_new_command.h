// dexcli's `flow continue-as-new` (docs/flow-rules.md, "Continue-as-new"):
// asks a Flow ID's latest run (its exact run ID) to go on as a new run of the
// Flow ID that holds its state; at once when no attempt of it runs, else
// once none does.
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace dex {
class Client;
}

namespace dex::cli {

class ContinueAsNewCommand {
 public:
  // Adds `continue-as-new` to the `flow` command.
  explicit ContinueAsNewCommand(CLI::App& flow);
  ~ContinueAsNewCommand();
  ContinueAsNewCommand(const ContinueAsNewCommand&) = delete;
  ContinueAsNewCommand& operator=(const ContinueAsNewCommand&) = delete;

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
