#include "bench_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/durability.h"
#include "objstore/filesystem_store.h"

extern char** environ;

namespace dex::bench {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string g_program = "bench";

// Every child process and scratch directory of this run.
std::mutex g_mu;
std::vector<pid_t> g_children;
std::vector<fs::path> g_scratch;

// Starts `argv` with `env`, stdout to `out` and stderr to `err`; registers it.
Child start(const std::string& name, const std::vector<std::string>& argv,
            const std::vector<std::string>& env_strings, const fs::path& out, const fs::path& err) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (const std::string& e : env_strings) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  std::string out_path = out.string(), err_path = err.string();
  const std::string exec_failed = g_program + ": exec failed\n";
  pid_t parent = getpid();
  std::unique_lock lock(g_mu);
  pid_t pid = fork();
  if (pid < 0) {
    int error = errno;
    lock.unlock();
    die(fmt::format("cannot fork for {}: {}", name, std::strerror(error)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // we block SIGINT/SIGTERM; the child must not
    int in_fd = open("/dev/null", O_RDONLY);
    int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    int err_fd = err_path == out_path
                     ? out_fd
                     : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (in_fd < 0 || out_fd < 0 || err_fd < 0) _exit(126);
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    execve(args[0], args.data(), env.data());
    (void)!write(2, exec_failed.data(), exec_failed.size());
    _exit(127);
  }
  g_children.push_back(pid);
  return Child{name, pid, err, out};
}

std::vector<std::string> our_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace

void set_program(std::string name) { g_program = std::move(name); }

const std::string& program() { return g_program; }

void add_scratch(const fs::path& dir) {
  std::lock_guard lock(g_mu);
  g_scratch.push_back(dir);
}

void cleanup() {
  std::lock_guard lock(g_mu);
  for (pid_t pid : g_children) kill(pid, SIGKILL);
  for (pid_t pid : g_children) waitpid(pid, nullptr, 0);
  g_children.clear();
  for (const fs::path& dir : g_scratch) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  g_scratch.clear();
}

void die(const std::string& message) {
  std::cout.flush();
  std::cerr << g_program << ": " << message << std::endl;
  cleanup();
  std::fflush(nullptr);
  _exit(1);  // other threads may be inside gRPC or curl calls: no static destructors
}

std::string tail(const fs::path& file, size_t lines) {
  std::ifstream in(file);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) {
    out += "    " + all[i] + "\n";
  }
  return out.empty() ? "    (empty)\n" : out;
}

void die_on_signals(const std::string& what) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::thread([signals, what] {
    int signal = 0;
    sigwait(&signals, &signal);
    die(fmt::format("signal {}: stopped; {}", signal, what));
  }).detach();
}

Child spawn(const std::string& name, const std::vector<std::string>& argv,
            const std::vector<std::string>& extra_env, const fs::path& log) {
  std::vector<std::string> env = our_environment();
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  return start(name, argv, env, log, log);
}

Child spawn_split(const std::string& name, const std::vector<std::string>& argv,
                  const fs::path& out, const fs::path& err) {
  return start(name, argv, our_environment(), out, err);
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {}", WTERMSIG(status));
  return "ended";
}

void forget(pid_t pid) {
  std::lock_guard lock(g_mu);
  std::erase(g_children, pid);
}

void check_alive(const Child& child) {
  int status = 0;
  if (waitpid(child.pid, &status, WNOHANG) == child.pid) {
    forget(child.pid);
    die(fmt::format("{} {}; last lines of {}:\n{}", child.name, describe_exit(status),
                    child.log.string(), tail(child.log, 20)));
  }
}

int stop(const Child& child, std::chrono::seconds grace) {
  kill(child.pid, SIGTERM);
  auto deadline = Clock::now() + grace;
  int status = 0;
  while (waitpid(child.pid, &status, WNOHANG) != child.pid) {
    if (Clock::now() > deadline) {
      std::cerr << fmt::format("{}: {} did not stop within {} s of SIGTERM; killing it\n",
                               g_program, child.name, grace.count());
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  forget(child.pid);
  return status;
}

void warn_unless_clean_exit(const Child& child, int status, size_t log_lines) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (log_lines > 0) {
    std::cerr << fmt::format("{}: warning: {} {} after SIGTERM; last lines:\n{}", g_program,
                             child.name, describe_exit(status), tail(child.log, log_lines));
  } else {
    std::cerr << fmt::format("{}: warning: {} {} after SIGTERM\n", g_program, child.name,
                             describe_exit(status));
  }
}

double cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) die(fmt::format("cannot read /proc/{}/stat", pid));
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

fs::path own_bin_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) die("cannot read /proc/self/exe: " + ec.message());
  return self.parent_path();
}

void require_programs(const fs::path& bin, std::initializer_list<const char*> programs) {
  for (const char* name : programs) {
    if (access((bin / name).c_str(), X_OK) != 0) {
      die(fmt::format("{} is not next to {} in {} (build it: cmake --build <build> --target {})",
                      name, g_program, bin.string(), name));
    }
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double fsync_floor_ms(const fs::path& dir) {
  // What one log batch costs the filesystem store: an append to an open file and its
  // fdatasync (docs/log.md, "On the filesystem backend: segments").
  std::string block(512, 'x');
  std::vector<double> lat;
  const fs::path file = dir / "fsync-floor";
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (fd < 0) die("the fsync floor could not write in " + dir.string());
  const auto end = Clock::now() + std::chrono::seconds(1);
  // Bounded by one second.
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    if (::write(fd, block.data(), block.size()) < 0 || ::fdatasync(fd) != 0)
      die("the fsync floor could not write in " + dir.string());
    lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  ::close(fd);
  std::error_code ec;
  fs::remove(file, ec);
  return percentile(lat, 0.5);
}

uint64_t dev_log_slots(const fs::path& data) {
  // Through the store: the log's slots are records in segment files, not files of their own.
  auto store = FilesystemObjectStore::open(data / "objects", Durability::kProcessCrashSafe);
  if (!store.is_ok())
    die("open " + (data / "objects").string() + ": " + store.status().to_string());
  auto keys = list_all(*store.value(), "nodes/dev/log/");
  if (!keys.is_ok()) die("list the log: " + keys.status().to_string());
  return keys.value().size();
}

std::string wait_dev_ready(const Child& server, std::chrono::seconds timeout) {
  static const std::regex kReady(R"(dex-server-zd dev ready: .* listening on (\S+))");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Bounded by `timeout`: the ready line is looked for every 20 ms.
  while (std::chrono::steady_clock::now() < deadline) {
    check_alive(server);
    std::ifstream in(server.out);
    std::smatch m;
    for (std::string line; std::getline(in, line);) {
      if (std::regex_search(line, m, kReady)) return m[1].str();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  die(fmt::format("{} printed no ready line within {} s; last lines of {}:\n{}", server.name,
                  timeout.count(), server.log.string(), tail(server.log, 20)));
}

}  // namespace dex::bench
