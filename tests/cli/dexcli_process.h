// What the dexcli process tests share: an in-process gRPC server hosting a
// fake service on a loopback port, and the dexcli binary (DEXCLI_PATH) run
// against it as a real process, its stdout, stderr and exit code kept.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace dex::cli::testing {

struct Result {
  int code = -1;
  std::string out, err;
  nlohmann::ordered_json out_json() const { return nlohmann::ordered_json::parse(out); }
  nlohmann::ordered_json error() const { return nlohmann::ordered_json::parse(err)["error"]; }
  // stdout as JSON lines (--all --output json).
  std::vector<nlohmann::ordered_json> lines() const {
    std::vector<nlohmann::ordered_json> out_lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      out_lines.push_back(nlohmann::ordered_json::parse(line));
    return out_lines;
  }
};

inline std::string quoted(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Serves `service` on 127.0.0.1 from start() to stop(); run() is one dexcli
// process against it, its output in a scratch directory named by `name`.
class DexcliAgainst {
 public:
  void start(grpc::Service& service, const std::string& name) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    dir_ = std::filesystem::temp_directory_path() /
           (name + "-" + std::to_string(::getpid()) + "-" + std::to_string(port_));
    std::filesystem::create_directories(dir_);
  }
  void stop() {
    if (server_) server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  Result run(const std::vector<std::string>& args) const {
    std::string cmd =
        quoted(DEXCLI_PATH) + " --server 127.0.0.1:" + std::to_string(port_) + " --timeout 5s";
    for (const std::string& a : args) cmd += " " + quoted(a);
    cmd += " >" + quoted(dir_ / "out") + " 2>" + quoted(dir_ / "err") + " </dev/null";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_all(dir_ / "out");
    r.err = read_all(dir_ / "err");
    return r;
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::filesystem::path dir_;
};

}  // namespace dex::cli::testing
