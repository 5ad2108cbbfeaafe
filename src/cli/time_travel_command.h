// dexcli's `flow time-travel` (docs/time-travel.md): a new run of a Flow ID
// from a point of its latest run's history, for one run (its exact run ID), or
// for every run a search query selects, at a bounded rate, with progress on
// stderr and a summary on stdout. A batch derives each run's request ID from
// the run and the point, so running it again travels nothing twice.
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace dex {
class Client;
}

namespace dex::cli {

class TimeTravelCommand {
 public:
  // Adds `time-travel` to the `flow` command.
  explicit TimeTravelCommand(CLI::App& flow);
  ~TimeTravelCommand();
  TimeTravelCommand(const TimeTravelCommand&) = delete;
  TimeTravelCommand& operator=(const TimeTravelCommand&) = delete;

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
