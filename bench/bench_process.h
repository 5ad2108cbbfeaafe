// What the benchmarks that start real processes (objstore_cost_bench,
// dex_flows_bench) share: a registry of the child processes and scratch
// directories of this run, so that any failure (or Ctrl-C) kills the one and
// removes the other; starting, watching and stopping children; a few figures.
//
// Messages name the program: call set_program() once, first thing in main().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

namespace dex::bench {

// The name messages start with ("dex_flows_bench: ...").
void set_program(std::string name);
const std::string& program();

// ------------------------------------------------------------------ cleanup

// Registers a scratch directory: removed by cleanup().
void add_scratch(const std::filesystem::path& dir);

// Kills (SIGKILL) and reaps every child still registered, removes every
// scratch directory.
void cleanup();

// Prints "<program>: <message>", cleans up and exits 1 without running static
// destructors (other threads may be inside gRPC or curl calls).
[[noreturn]] void die(const std::string& message);

// The last `lines` lines of `file`, each indented, for a message.
std::string tail(const std::filesystem::path& file, size_t lines);

// SIGINT and SIGTERM are blocked in every thread (children unblock them) and
// taken by one thread that dies with "signal N: stopped; <what>".
void die_on_signals(const std::string& what);

// ------------------------------------------------------------------ processes

struct Child {
  std::string name;
  pid_t pid = -1;
  std::filesystem::path log;  // what to show when it fails: its stderr (and stdout if shared)
  std::filesystem::path out;  // its stdout
};

// Starts `argv` (argv[0] a path) with `extra_env` added to our environment,
// stdout and stderr to `log`; it dies with us.
Child spawn(const std::string& name, const std::vector<std::string>& argv,
            const std::vector<std::string>& extra_env, const std::filesystem::path& log);

// Starts `argv` with our environment, stdout to `out` and stderr to `err` (the
// same file if they are equal); it dies with us. The Child's log is `err`.
Child spawn_split(const std::string& name, const std::vector<std::string>& argv,
                  const std::filesystem::path& out, const std::filesystem::path& err);

// "exited with status N", "was killed by signal N".
std::string describe_exit(int status);

// Takes `pid` out of the registry (it has been reaped).
void forget(pid_t pid);

// Dies with the child's last log lines if it has exited.
void check_alive(const Child& child);

// SIGTERM, then SIGKILL after `grace`. Returns the wait status.
int stop(const Child& child, std::chrono::seconds grace);

// Warns on stderr unless `status` (from stop()) is exit status 0; with
// `log_lines`, shows that many last lines of the child's log.
void warn_unless_clean_exit(const Child& child, int status, size_t log_lines = 0);

// The address a `dex-server-zd dev` child printed in its ready line (read
// from its stdout file); dies with its last log lines if none comes in `timeout`.
std::string wait_dev_ready(const Child& server, std::chrono::seconds timeout);

// utime + stime of `pid` in seconds (/proc/<pid>/stat fields 14 and 15).
double cpu_seconds(pid_t pid);

// The directory of this executable (where the programs it starts are built).
std::filesystem::path own_bin_dir();

// Dies unless each of `programs` is an executable in `bin`.
void require_programs(const std::filesystem::path& bin,
                      std::initializer_list<const char*> programs);

// ------------------------------------------------------------------ figures

// The value at fraction `p` (0.5, 0.99) of `v`; 0 if empty.
double percentile(std::vector<double> v, double p);

// The fsync floor: p50 (ms) over one second of a 512 B append and fdatasync of a
// file in `dir` (the server's file system), what one strict log batch cannot beat.
double fsync_floor_ms(const std::filesystem::path& dir);

// The log slots a `dex-server-zd dev` with data directory `data` has written
// (one object per log batch).
uint64_t dev_log_slots(const std::filesystem::path& data);

}  // namespace dex::bench
