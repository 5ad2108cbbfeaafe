// dex-server-zd: the dex server. Subcommands: dev (now); local and serve come
// with the S3 backend and standby issues.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "config/config.h"
#include "server/dev_server.h"

int main(int argc, char** argv) {
  CLI::App app{"dex-server-zd: the dex durable-execution server"};
  app.require_subcommand(1);

  dex::DevConfig dev;
  std::string data_dir = dev.data_dir.string();
  std::string durability;
  std::string config_file;
  CLI::App* dev_cmd = app.add_subcommand(
      "dev",
      "Run one node with zero configuration: a filesystem object store and the local store under "
      "one data directory, lease 30s, durability strict. Holds <data-dir>/dev.lock, so a second "
      "dev process on the same directory refuses to start; after a crash a restart takes the "
      "lease over at once with a raised epoch. SIGINT/SIGTERM release the lease and exit 0; a lost "
      "lease exits 1.");
  dev_cmd->add_option("--data-dir", data_dir, "Data directory (created if missing)")
      ->capture_default_str();
  dev_cmd
      ->add_option("--durability", durability,
                   "strict: fsync every write before the reply (default; survives power loss); "
                   "processCrashSafe: no fsync (survives a process crash, not a host crash); "
                   "relaxed: no fsync, and after an abrupt exit the data directory must be deleted")
      ->check(CLI::IsMember({"strict", "processCrashSafe", "relaxed"}));
  dev_cmd->add_option("--config", config_file,
                      "YAML override file: nodeId, lease.duration (default 30s), lease.failIfHeld, "
                      "dev.durabilityMode, standby.mode (cold only)");

  CLI11_PARSE(app, argc, argv);

  // Logs go to stderr; stdout carries only the ready line.
  spdlog::set_default_logger(spdlog::stderr_color_mt("dex"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  if (*dev_cmd) {
    if (!config_file.empty()) {
      if (dex::Status s = dex::apply_dev_override_file(config_file, dev); !s.is_ok()) {
        spdlog::error("{}", s.message());
        return 2;
      }
    }
    if (!durability.empty()) dev.durability = *dex::parse_durability(durability);  // flag wins
    dev.data_dir = data_dir;
    return dex::run_dev_server(dev);
  }
  return 2;
}
