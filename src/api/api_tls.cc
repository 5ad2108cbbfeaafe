#include "api/api_tls.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace dex {

namespace fs = std::filesystem;

namespace {

// How often gRPC reads the staged files (its unit is whole seconds).
constexpr unsigned kGrpcRefreshSeconds = 1;

// Writes `text` to a new file readable by this user only.
Status write_private(const fs::path& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::permanent(fmt::format("cannot create {}: {}", file.string(), strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      return Status::permanent(fmt::format("cannot write {}: {}", file.string(), strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::ok();
}

grpc_ssl_client_certificate_request_type request_type(tls::ClientAuth auth) {
  switch (auth) {
    case tls::ClientAuth::kNone:
      return GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
    case tls::ClientAuth::kOptional:
      return GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
    case tls::ClientAuth::kRequired:
      return GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
}

// Where the staging directory goes: /dev/shm when it is there (memory, so the
// key's copies never reach a disk), else $TMPDIR or /tmp.
fs::path staging_parent() {
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path();
}

// A process killed without its cleanup leaves its staging directory (its
// name holds the pid): removed here once no process has that pid. Bounded by
// the directory's entries.
void remove_stale_staging(const fs::path& parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "dex-api-tls-";
    if (name.rfind(kPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
    struct stat st {};
    if (pid <= 0 || ::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::getuid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

StatusOr<std::unique_ptr<ApiTls>> ApiTls::start(std::shared_ptr<tls::TlsWatcher> watcher) {
  const fs::path parent = staging_parent();
  remove_stale_staging(parent);
  std::string pattern = (parent / fmt::format("dex-api-tls-{}-XXXXXX", getpid())).string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return Status::permanent(
        fmt::format("api.tls: cannot create a staging directory {}: {}", pattern, strerror(errno)));
  }
  std::unique_ptr<ApiTls> api_tls(new ApiTls(std::move(watcher), pattern));
  if (Status s = api_tls->stage(*api_tls->watcher_->current(), 1); !s.is_ok()) return s;
  const bool ca = !api_tls->watcher_->files().client_ca_file.empty();
  const fs::path current = api_tls->dir_ / "current";
  auto provider = ca ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                           (current / "key.pem").string(), (current / "cert.pem").string(),
                           (current / "ca.pem").string(), kGrpcRefreshSeconds)
                     : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                           (current / "key.pem").string(), (current / "cert.pem").string(),
                           kGrpcRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (ca) options.watch_root_certs();
  options.set_cert_request_type(request_type(api_tls->watcher_->files().client_auth));
  api_tls->credentials_ = grpc::experimental::TlsServerCredentials(options);
  if (api_tls->credentials_ == nullptr) {
    return Status::permanent("api.tls: gRPC refused the TLS settings");
  }
  ApiTls* self = api_tls.get();
  api_tls->watcher_->set_on_change([self](const tls::ServerTlsMaterial& material,
                                          uint64_t generation) {
    if (Status s = self->stage(material, generation); !s.is_ok()) {
      spdlog::error("api.tls: the new certificate could not be handed to gRPC: {}", s.to_string());
    }
  });
  // A change accepted before the callback was set is staged now.
  if (const uint64_t generation = self->watcher_->generation(); generation != 1) {
    if (Status s = self->stage(*self->watcher_->current(), generation); !s.is_ok()) return s;
  }
  return api_tls;
}

ApiTls::ApiTls(std::shared_ptr<tls::TlsWatcher> watcher, fs::path dir)
    : watcher_(std::move(watcher)), dir_(std::move(dir)) {}

ApiTls::~ApiTls() {
  watcher_->set_on_change(nullptr);
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

// Generation N goes to <dir>/g<N>/ and the symlink <dir>/current is swapped
// to it with one rename, so gRPC never reads a half-written set. Each
// generation's files carry the modification time start + N seconds: gRPC
// compares the key's and the certificate's times before and after it reads
// them and reads again when they moved, which catches a swap between its two
// reads (a new key with the old certificate). Generation N-2 is removed;
// N-1 stays for a read that started before the swap.
Status ApiTls::stage(const tls::ServerTlsMaterial& material, uint64_t generation) {
  const fs::path gen_dir = dir_ / fmt::format("g{}", generation);
  std::error_code ec;
  fs::create_directory(gen_dir, ec);
  if (ec)
    return Status::permanent(fmt::format("cannot create {}: {}", gen_dir.string(), ec.message()));
  const struct {
    const char* name;
    const std::string& text;
  } files[] = {{"key.pem", material.key_pem},
               {"cert.pem", material.cert_chain_pem},
               {"ca.pem", material.client_ca_pem}};
  static const auto base = fs::file_time_type::clock::now();
  for (const auto& f : files) {
    if (Status s = write_private(gen_dir / f.name, f.text); !s.is_ok()) return s;
    fs::last_write_time(gen_dir / f.name,
                        base + std::chrono::seconds(static_cast<int64_t>(generation)), ec);
  }
  const fs::path link = dir_ / "current.next";
  fs::remove(link, ec);
  fs::create_directory_symlink(gen_dir.filename(), link, ec);
  if (ec) return Status::permanent(fmt::format("cannot link {}: {}", link.string(), ec.message()));
  fs::rename(link, dir_ / "current", ec);
  if (ec) return Status::permanent(fmt::format("cannot swap {}: {}", link.string(), ec.message()));
  if (generation > 2) fs::remove_all(dir_ / fmt::format("g{}", generation - 2), ec);
  return Status::ok();
}

}  // namespace dex
