#include "s3_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

extern char** environ;

namespace dex::objstore_test {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(60);
constexpr auto kStopTimeout = std::chrono::seconds(10);
constexpr int kStartAttempts = 3;

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : std::move(fallback);
}

bool executable(const std::filesystem::path& p) {
  return !p.empty() && ::access(p.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(p);
}

std::optional<std::filesystem::path> on_path(std::string_view name) {
  std::stringstream dirs(env_or("PATH", ""));
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (executable(candidate)) return candidate;
  }
  return std::nullopt;
}

// A port nobody listens on right now (the kernel's pick for an ephemeral bind).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// Sends SIGTERM to the server's process group, waits up to kStopTimeout, then SIGKILL.
void stop_process(pid_t pid) {
  if (pid <= 0) return;
  ::kill(-pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + kStopTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      ::kill(-pid, SIGKILL);  // leftovers of the group, if any
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);
  int status;
  ::waitpid(pid, &status, 0);
}

// fork + exec with everything prepared before the fork (the child only calls
// async-signal-safe functions). The child leads its own process group and dies
// with the test process.
pid_t spawn(const std::filesystem::path& binary, const std::vector<std::string>& args,
            const std::vector<std::string>& extra_env, const std::filesystem::path& log) {
  std::vector<char*> argv;
  std::string bin = binary.string();
  argv.push_back(bin.data());
  std::vector<std::string> args_copy = args;
  for (auto& a : args_copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::close(fd);
  }
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, 0);
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

std::mutex shared_mu;
std::unique_ptr<S3TestServer> shared_servers[2];  // protected by shared_mu
std::string shared_errors[2];                     // protected by shared_mu
bool shared_tried[2] = {false, false};            // protected by shared_mu
std::atomic<int> prefix_counter{0};

}  // namespace

std::optional<std::filesystem::path> S3TestServer::find_binary(S3ServerKind kind) {
  if (kind == S3ServerKind::kMoto) {
    if (const std::string v = env_or("DEX_MOTO_SERVER", ""); !v.empty()) {
      return executable(v) ? std::optional<std::filesystem::path>(v) : std::nullopt;
    }
    return on_path("moto_server");
  }
  if (const std::string v = env_or("DEX_MINIO_BIN", ""); !v.empty()) {
    return executable(v) ? std::optional<std::filesystem::path>(v) : std::nullopt;
  }
  const std::string home = env_or("HOME", "/nonexistent");
  std::vector<std::filesystem::path> candidates = {
      std::filesystem::path(env_or("DEX_CACHE_DIR", home + "/.cache/dex")) / "bin" / "minio"};
  if (const std::string gobin = env_or("GOBIN", ""); !gobin.empty()) {
    candidates.push_back(std::filesystem::path(gobin) / "minio");
  }
  if (const std::string gopath = env_or("GOPATH", ""); !gopath.empty()) {
    candidates.push_back(std::filesystem::path(gopath) / "bin" / "minio");
  }
  candidates.push_back(std::filesystem::path(home) / "go" / "bin" / "minio");
  for (const auto& c : candidates) {
    if (executable(c)) return c;
  }
  return on_path("minio");
}

std::string S3TestServer::install_hint(S3ServerKind kind) {
  if (kind == S3ServerKind::kMoto) {
    return "moto_server is not installed (pip install 'moto[server]'); set DEX_MOTO_SERVER to "
           "use another path";
  }
  return "MinIO is not installed: run scripts/install-minio (caches "
         "~/.cache/dex/bin/minio); or set DEX_MINIO_BIN";
}

S3Options S3TestServer::options(std::string prefix) const {
  S3Options o;
  o.bucket = std::string(kBucket);
  o.prefix = std::move(prefix);
  o.endpoint = endpoint();
  o.region = "us-east-1";
  o.credentials = {std::string(kAccessKey), std::string(kSecretKey), ""};
  o.request_timeout = std::chrono::seconds(30);
  return o;
}

std::string S3TestServer::fresh_prefix() {
  return fmt::format("t-{}-{}", ::getpid(), prefix_counter++);
}

std::unique_ptr<S3ObjectStore> S3TestServer::fresh_store() const {
  auto store = S3ObjectStore::open(options(fresh_prefix()));
  if (!store.is_ok()) return nullptr;
  return std::move(store).value();
}

std::string S3TestServer::log_tail() const {
  std::ifstream in(dir_->path() / "server.log");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr size_t kTailBytes = 2000;
  return all.size() > kTailBytes ? all.substr(all.size() - kTailBytes) : all;
}

StatusOr<std::unique_ptr<S3TestServer>> S3TestServer::start(S3ServerKind kind) {
  const auto binary = find_binary(kind);
  if (!binary) return Status::permanent(install_hint(kind));
  std::string last_error;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    auto dir = std::make_unique<TempDir>();
    const int port = free_port();
    if (port == 0) return Status::transient("no free loopback port");
    std::vector<std::string> args, env;
    if (kind == S3ServerKind::kMinio) {
      std::filesystem::create_directories(dir->path() / "data");
      args = {"server",      (dir->path() / "data").string(),
              "--address",   fmt::format("127.0.0.1:{}", port),
              "--certs-dir", (dir->path() / "certs").string(),
              "--quiet"};
      // MinIO holds a conditional PUT of a key behind a stalled PUT of that key until the
      // stalled one's connection has been silent for the idle timeout (default 30 s): a frozen
      // writer would stall the next one past its 10 s log write limit (issue 30;
      // docs/operations.md).
      for (const auto& flag : kMinioTimeoutFlags) args.emplace_back(flag);
      env = {fmt::format("MINIO_ROOT_USER={}", kAccessKey),
             fmt::format("MINIO_ROOT_PASSWORD={}", kSecretKey), "MINIO_BROWSER=off",
             "MINIO_UPDATE=off", "MINIO_CALLHOME_ENABLE=off"};
    } else {
      args = {"-H", "127.0.0.1", "-p", std::to_string(port)};
      env = {"MOTO_CALL_RESET_API=true"};
    }
    const pid_t pid = spawn(*binary, args, env, dir->path() / "server.log");
    if (pid < 0) return Status::permanent(fmt::format("fork: {}", std::strerror(errno)));
    std::unique_ptr<S3TestServer> server(new S3TestServer(kind, port, pid, std::move(dir)));
    auto admin = S3ObjectStore::open(server->options(""));
    if (!admin.is_ok()) return admin.status();
    const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
    Status last = Status::transient("not tried");
    bool exited = false;
    while (std::chrono::steady_clock::now() < deadline) {
      int status;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        server->pid_ = -1;
        break;
      }
      last = admin.value()->create_bucket(RequestOptions{std::chrono::seconds(2)});
      if (last.is_ok()) return server;
      if (!last.is_transient()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    last_error =
        fmt::format("{} on port {} {}: {}; log:\n{}", binary->string(), port,
                    exited ? "exited" : "did not come up", last.to_string(), server->log_tail());
    if (!exited) break;  // a hang or a refusal is not a port clash: do not retry
  }
  return Status::permanent(last_error);
}

S3TestServer::~S3TestServer() { stop_process(pid_); }

S3TestServer* S3TestServer::shared(S3ServerKind kind, std::string* error) {
  const int i = kind == S3ServerKind::kMinio ? 0 : 1;
  std::lock_guard<std::mutex> lock(shared_mu);
  if (!shared_tried[i]) {
    shared_tried[i] = true;
    if (!find_binary(kind)) {
      shared_errors[i] = install_hint(kind);
    } else {
      auto server = start(kind);
      if (server.is_ok()) {
        shared_servers[i] = std::move(server).value();
      } else {
        shared_errors[i] = "starting the server failed: " + server.status().to_string();
      }
    }
  }
  if (shared_servers[i] != nullptr) return shared_servers[i].get();
  *error = shared_errors[i];
  return nullptr;
}

void S3TestServer::stop_shared() {
  std::lock_guard<std::mutex> lock(shared_mu);
  for (auto& s : shared_servers) s.reset();
}

}  // namespace dex::objstore_test
