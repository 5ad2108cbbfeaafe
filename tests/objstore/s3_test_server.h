// Real S3 servers for the S3 backend's tests, started on a free loopback port
// with a fresh data directory and stopped (SIGTERM, then SIGKILL after a bound)
// when the test process ends. One server of each kind per test process, started
// on first use; every store a test gets has a fresh prefix, so stores are empty.
//
//  - MinIO: the binary from $DEX_MINIO_BIN, else ${DEX_CACHE_DIR:-~/.cache/dex}/bin/minio
//    (where scripts/install-minio puts it), else $GOBIN, $GOPATH/bin, ~/go/bin, PATH.
//  - moto: `moto_server` from $DEX_MOTO_SERVER or PATH.
// A missing binary fails the tests (it never skips them) with a message saying how to install
// it: scripts/test installs both, so a broken install cannot leave the S3 backend untested.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "objstore/s3_store.h"
#include "test_util.h"

namespace dex::objstore_test {

enum class S3ServerKind { kMinio, kMoto };

class S3TestServer {
 public:
  static constexpr std::string_view kBucket = "dex-test";
  static constexpr std::string_view kAccessKey = "dexadmin";
  static constexpr std::string_view kSecretKey = "dex-test-secret-key";
  // The MinIO server flags that bound how long a silent client connection (a frozen process's
  // half-sent PUT) keeps its request, and the lock of a conditional PUT, alive.
  static constexpr std::string_view kMinioTimeoutFlags[] = {"--idle-timeout", "2s",
                                                            "--read-header-timeout", "2s"};

  // The binary to run, or nullopt if it is not installed.
  static std::optional<std::filesystem::path> find_binary(S3ServerKind kind);
  // What to tell the user when find_binary() found nothing.
  static std::string install_hint(S3ServerKind kind);

  // Starts a server and creates kBucket (with the S3 client under test). Waits
  // at most kStartTimeout; fails with the server's log tail if it does not come up.
  static StatusOr<std::unique_ptr<S3TestServer>> start(S3ServerKind kind);
  ~S3TestServer();

  // The process-wide server of `kind`, started on first use; nullptr if the
  // binary is absent (*error says how to install it) or it failed to start (*error says why).
  static S3TestServer* shared(S3ServerKind kind, std::string* error);
  // Stops the shared servers (called at the end of the test program).
  static void stop_shared();

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  S3ServerKind kind() const { return kind_; }
  // Options for a store in kBucket under `prefix`.
  S3Options options(std::string prefix) const;
  // A prefix no other store of this process has used.
  static std::string fresh_prefix();
  // A store under a fresh_prefix().
  std::unique_ptr<S3ObjectStore> fresh_store() const;
  pid_t pid() const { return pid_; }

 private:
  S3TestServer(S3ServerKind kind, int port, pid_t pid, std::unique_ptr<TempDir> dir)
      : kind_(kind), port_(port), pid_(pid), dir_(std::move(dir)) {}
  std::string log_tail() const;

  S3ServerKind kind_;
  int port_;
  pid_t pid_;
  std::unique_ptr<TempDir> dir_;  // data dir and log; removed after the server stopped
};

}  // namespace dex::objstore_test
