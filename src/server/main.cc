// dex-server-zd: the dex server. Subcommands: dev (zero configuration), local
// (the same on a configured data directory) and serve (S3 object storage,
// cold standby).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <iostream>

#include "common/version.h"
#include "config/config.h"
#include "server/dev_server.h"
#include "server/malloc_arenas.h"
#include "server/serve_check.h"

int main(int argc, char** argv) {
  dex::limit_malloc_arenas();  // before any thread: they pick their arena at their first malloc
  CLI::App app{"dex-server-zd: the dex durable-execution server"};
  app.require_subcommand(1);

  dex::NodeSettings dev = dex::NodeSettings::defaults(dex::Subcommand::kDev);
  std::string data_dir = dev.data_dir.string();
  std::string durability;
  std::string listen;
  std::string config_file;
  std::string web_listen;
  std::string web_assets;
  bool no_web = false;
  CLI::App* dev_cmd = app.add_subcommand(
      "dev",
      "Run one node with zero configuration: a filesystem object store and the local store under "
      "one data directory, lease 30s, durability strict, API on 127.0.0.1:8801. Holds "
      "<data-dir>/dev.lock, so a second dev process on the same directory refuses to start; after "
      "a crash a restart takes the lease over at once with a raised epoch. SIGINT/SIGTERM drain "
      "(no new tasks; running attempts may finish for up to lifecycle.attemptDrainTimeout, 30s), "
      "then release the lease and exit 0; a second signal skips the drain; a lost lease exits 1. "
      "Also serves dex-web, the browser UI and its JSON gateway, on 127.0.0.1:8802.");
  dev_cmd->add_option("--data-dir", data_dir, "Data directory (created if missing)")
      ->capture_default_str();
  dev_cmd->add_option("--listen", listen, "API address host:port (default 127.0.0.1:8801)");
  dev_cmd->add_option("--web-listen", web_listen,
                      "dex-web's address host:port (default 127.0.0.1:8802): the browser UI and "
                      "its JSON gateway to the API (docs/dex-web.md)");
  dev_cmd->add_flag("--no-web", no_web, "Do not serve dex-web");
  dev_cmd->add_option("--web-assets", web_assets,
                      "dex-web's built files (default: <directory of this binary>/../share/"
                      "dex-web, where scripts/build-web puts them; without them a page says how "
                      "to build them and the JSON gateway still works)");
  dev_cmd
      ->add_option("--durability", durability,
                   "strict: fsync every write before the reply (default; survives power loss); "
                   "processCrashSafe: no fsync (survives a process crash, not a host crash); "
                   "relaxed: no fsync, and after an abrupt exit the data directory must be deleted")
      ->check(CLI::IsMember({"strict", "processCrashSafe", "relaxed"}));
  dev_cmd->add_option(
      "--config", config_file,
      "YAML override file: nodeId, api.listen, lease.duration (default 30s), "
      "lease.failIfHeld, dev.durabilityMode, standby.mode (cold only), snapshots.interval "
      "(default 10m), snapshots.everyRecords (default 10000), snapshots.keep "
      "(default 2), values.blobThreshold (default 256KiB), values.maxSize (default 64MiB), "
      "values.blobCacheSize (default 64MiB), values.blobCollectInterval (default 1h), "
      "values.blobMinAge (default 1h), flows.retention (default 7d), flows.workerReconnectGrace "
      "(default 5s), admin.enabled (default "
      "true; false: AdminService answers UNIMPLEMENTED), "
      "auth.adminTokenFiles / auth.adminTokenSha256 (admin calls then need the credential; "
      "without one, a listen address beyond loopback is warned about), auth.tokens.<role>.files/"
      "sha256 and auth.certificateRoles (viewer, client, worker, admin: every call then needs a "
      "credential; docs/api.md \"Access\"), web.listen (default "
      "127.0.0.1:8802; empty: off), web.assets");

  std::string local_config;
  CLI::App* local_cmd = app.add_subcommand(
      "local",
      "Run one node on a configured data directory: the same lease, lock, takeover and durability "
      "modes as dev, settings from a YAML file (nodeId and local.dataDir required; api.listen, "
      "local.durabilityMode, lease.duration, lease.failIfHeld, standby.mode: cold, snapshots.*, "
      "values.*, admin.enabled, auth.adminTokenFiles, auth.adminTokenSha256, auth.tokens, "
      "auth.certificateRoles, web.listen and "
      "web.assets: dex-web, the browser UI, off unless web.listen is set). Calls need no "
      "credential unless auth.* gives one; on an api.listen beyond loopback "
      "(not 127.0.0.0/8, ::1, localhost) that is warned about at startup.");
  local_cmd->add_option("--config", local_config, "YAML config file")->required();

  std::string serve_config;
  bool serve_check = false;
  CLI::App* serve_cmd = app.add_subcommand(
      "serve",
      "Run a node in production shape: its lease and log in S3-compatible object storage (or a "
      "filesystem path), its local store rebuildable from them, lease 10s, API on 0.0.0.0:8801. A "
      "second process with the same nodeId and object storage waits as a cold standby and takes "
      "over when the lease is released (at once) or expires (duration + 1s). SIGINT/SIGTERM drain "
      "running attempts (up to lifecycle.attemptDrainTimeout), then release the lease and exit 0; "
      "a second signal skips the drain. web.listen serves dex-web, the browser UI (off by "
      "default). "
      "Settings: docs/configuration.md.");
  serve_cmd->add_option("--config", serve_config, "YAML config file")->required();
  serve_cmd->add_flag(
      "--check", serve_check,
      "Validate the config and what startup would refuse (S3 bucket name, region, endpoint, "
      "credentials present; no request is sent), print the effective settings as a config "
      "that --config accepts again, and exit: 0 valid, 2 refused");

  app.set_version_flag("--version", dex::version_line("dex-server-zd"));
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
    // Flags win over the override file.
    if (!durability.empty()) dev.durability = *dex::parse_durability(durability);
    if (!listen.empty()) {
      if (dex::Status s = dex::validate_listen_address(listen); !s.is_ok()) {
        spdlog::error("--listen: {}", s.message());
        return 2;
      }
      dev.listen = listen;
    }
    if (!web_listen.empty()) {
      if (dex::Status s = dex::validate_listen_address(web_listen); !s.is_ok()) {
        spdlog::error("--web-listen: {}", s.message());
        return 2;
      }
      dev.web_listen = web_listen;
      dev.web_listen_is_default = false;
    }
    if (no_web) dev.web_listen.clear();
    if (!web_assets.empty()) dev.web_assets = web_assets;
    if (dex::Status s = dex::check_web_listen(dev); !s.is_ok()) {
      spdlog::error("{} (--web-listen, --no-web)", s.message());
      return 2;
    }
    dev.data_dir = data_dir;
    return dex::run_dev_server(dev, dex::Subcommand::kDev);
  }
  if (*serve_cmd) {
    auto config = dex::load_serve_config_file(serve_config);
    if (!config.is_ok()) {
      spdlog::error("{}", config.status().message());
      return 2;
    }
    if (serve_check) {
      if (dex::Status s = dex::check_serve_config(config.value()); !s.is_ok()) {
        spdlog::error("{}: {}", serve_config, s.message());
        return 2;
      }
      std::cout << dex::describe_serve_config(config.value());
      return 0;
    }
    return dex::run_serve_server(config.value());
  }
  if (*local_cmd) {
    auto config = dex::load_local_config_file(local_config);
    if (!config.is_ok()) {
      spdlog::error("{}", config.status().message());
      return 2;
    }
    return dex::run_dev_server(config.value(), dex::Subcommand::kLocal);
  }
  return 2;
}
