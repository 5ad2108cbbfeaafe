#include "sdk/tls_options.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

namespace dex {

namespace {

template <typename T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using X509Ptr = std::unique_ptr<X509, Free<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using CtxPtr = std::unique_ptr<SSL_CTX, Free<SSL_CTX, SSL_CTX_free>>;
using SslPtr = std::unique_ptr<SSL, Free<SSL, SSL_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Free<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Free<X509_STORE_CTX, X509_STORE_CTX_free>>;

StatusOr<std::string> read_pem(std::string_view option, const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) {
    return Status::invalid_argument(
        fmt::format("{} '{}': cannot be read (missing, or no permission)", option, file));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

X509Ptr first_certificate(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509Ptr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  ERR_clear_error();
  return cert;
}

KeyPtr private_key(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  KeyPtr key(PEM_read_bio_PrivateKey(
      bio, nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  BIO_free(bio);
  ERR_clear_error();
  return key;
}

std::string time_text(const ASN1_TIME* time) {
  BIO* bio = BIO_new(BIO_s_mem());
  ASN1_TIME_print(bio, time);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

std::string name_text(const X509_NAME* name) {
  char buf[256];
  X509_NAME_oneline(name, buf, sizeof(buf));
  return buf;
}

bool yes_no(std::string_view text, bool& out) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "1" || t == "true" || t == "yes") return out = true, true;
  if (t == "0" || t == "false" || t == "no" || t.empty()) return out = false, true;
  return false;
}

}  // namespace

bool tls_active(const TlsOptions& tls) {
  return tls.enabled || !tls.ca_file.empty() || !tls.cert_file.empty() || !tls.key_file.empty() ||
         !tls.server_name.empty();
}

Status apply_tls_env(TlsOptions& tls) {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v == nullptr ? std::string() : std::string(v);
  };
  if (!tls.enabled) {
    bool on = false;
    if (!yes_no(env(kTlsEnv), on)) {
      return Status::invalid_argument(
          fmt::format("{}='{}': use 1 or 0 (true/false, yes/no)", kTlsEnv, env(kTlsEnv)));
    }
    tls.enabled = on;
  }
  if (tls.ca_file.empty()) tls.ca_file = env(kTlsCaFileEnv);
  if (tls.cert_file.empty()) tls.cert_file = env(kTlsCertFileEnv);
  if (tls.key_file.empty()) tls.key_file = env(kTlsKeyFileEnv);
  if (tls.server_name.empty()) tls.server_name = env(kTlsServerNameEnv);
  return Status::ok();
}

Status check_tls_options(const TlsOptions& tls) {
  if (!tls_active(tls)) return Status::ok();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return Status::invalid_argument(
        "the client certificate needs its key: give --cert-file and --key-file together");
  }
  if (!tls.ca_file.empty()) {
    auto ca = read_pem("--ca-file", tls.ca_file);
    if (!ca.is_ok()) return ca.status();
    if (first_certificate(ca.value()) == nullptr) {
      return Status::invalid_argument(
          fmt::format("--ca-file '{}': holds no PEM certificate", tls.ca_file));
    }
  }
  if (tls.cert_file.empty()) return Status::ok();
  auto cert_pem = read_pem("--cert-file", tls.cert_file);
  if (!cert_pem.is_ok()) return cert_pem.status();
  X509Ptr cert = first_certificate(cert_pem.value());
  if (cert == nullptr) {
    return Status::invalid_argument(
        fmt::format("--cert-file '{}': holds no PEM certificate", tls.cert_file));
  }
  auto key_pem = read_pem("--key-file", tls.key_file);
  if (!key_pem.is_ok()) return key_pem.status();
  KeyPtr key = private_key(key_pem.value());
  if (key == nullptr) {
    return Status::invalid_argument(
        fmt::format("--key-file '{}': holds no PEM private key (an encrypted key is not supported)",
                    tls.key_file));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::invalid_argument(
        fmt::format("--key-file '{}' does not match the certificate in --cert-file '{}'",
                    tls.key_file, tls.cert_file));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(cert.get())) <= 0) {
    return Status::invalid_argument(
        fmt::format("--cert-file '{}': the client certificate expired on {}", tls.cert_file,
                    time_text(X509_get0_notAfter(cert.get()))));
  }
  return Status::ok();
}

namespace {

// host and port of "host:port" / "[v6]:port".
std::pair<std::string, std::string> split_address(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return {address, ""};
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, address.substr(colon + 1)};
}

// A connected TCP socket, or -1; bounded by `timeout`.
int connect_tcp(const std::string& host, const std::string& port, Duration timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno != EINPROGRESS) {
      close(fd);
      fd = -1;
      continue;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof(err);
    if (rc != 0 && (poll(&p, 1, static_cast<int>(to_ms(timeout))) != 1 ||
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return -1;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  timeval tv{static_cast<time_t>(to_ms(timeout) / 1000),
             static_cast<suseconds_t>((to_ms(timeout) % 1000) * 1000)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

// OpenSSL's reason for the last failure ("tlsv13 alert certificate required").
std::string ssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  const char* reason = e == 0 ? nullptr : ERR_reason_error_string(e);
  ERR_clear_error();
  return reason == nullptr ? std::string() : std::string(reason);
}

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// What the server's refusal of this client says.
// `detail`: the server's alert, or that it closed the connection.
std::string refused_client(const std::string& detail, const TlsOptions& tls) {
  if (tls.cert_file.empty()) {
    return fmt::format(
        "the server requires a client certificate ({}): give --cert-file and --key-file ({}, {})",
        detail, kTlsCertFileEnv, kTlsKeyFileEnv);
  }
  return fmt::format(
      "the server refused this client's certificate {} ({}): it is expired, or not signed by a "
      "CA in the server's clientCaFile",
      tls.cert_file, detail);
}

// The DNS names and IPv4 addresses a certificate is for, "DNS:a, IP:1.2.3.4".
std::string names_of(X509* cert) {
  std::string names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; sans != nullptr && i < sk_GENERAL_NAME_num(sans); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(sans, i);
    if (g->type == GEN_DNS) {
      names += fmt::format("{}DNS:{}", names.empty() ? "" : ", ",
                           reinterpret_cast<const char*>(ASN1_STRING_get0_data(g->d.dNSName)));
    } else if (g->type == GEN_IPADD && g->d.iPAddress->length == 4) {
      const unsigned char* b = ASN1_STRING_get0_data(g->d.iPAddress);
      names += fmt::format("{}IP:{}.{}.{}.{}", names.empty() ? "" : ", ", b[0], b[1], b[2], b[3]);
    }
  }
  GENERAL_NAMES_free(sans);
  return names;
}

// The server's certificate chain checked against the CA and the name.
std::string check_server_chain(SSL* ssl, const TlsOptions& tls, const std::string& name) {
  X509* leaf = SSL_get0_peer_certificate(ssl);
  if (leaf == nullptr) return "the server presented no certificate";
  StorePtr store(X509_STORE_new());
  if (tls.ca_file.empty()) {
    X509_STORE_set_default_paths(store.get());
  } else {
    X509_STORE_load_file(store.get(), tls.ca_file.c_str());
  }
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, SSL_get_peer_cert_chain(ssl));
  const std::string cas = tls.ca_file.empty() ? std::string("the system's CAs")
                                              : fmt::format("--ca-file {}", tls.ca_file);
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    X509* bad = X509_STORE_CTX_get_current_cert(ctx.get());
    if (bad == nullptr) bad = leaf;
    ERR_clear_error();
    switch (err) {
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return fmt::format("the server's certificate {} expired on {}",
                           name_text(X509_get_subject_name(bad)),
                           time_text(X509_get0_notAfter(bad)));
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return fmt::format("the server's certificate {} is not valid before {}",
                           name_text(X509_get_subject_name(bad)),
                           time_text(X509_get0_notBefore(bad)));
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        return fmt::format(
            "the server's certificate {} (issued by {}) is not signed by a CA in {}: give the CA "
            "that signed it with --ca-file ({})",
            name_text(X509_get_subject_name(leaf)), name_text(X509_get_issuer_name(leaf)), cas,
            kTlsCaFileEnv);
      default:
        return fmt::format("the server's certificate {} does not verify against {}: {}",
                           name_text(X509_get_subject_name(leaf)), cas,
                           X509_verify_cert_error_string(err));
    }
  }
  in6_addr ip6;
  in_addr ip4;
  const bool ip =
      inet_pton(AF_INET, name.c_str(), &ip4) == 1 || inet_pton(AF_INET6, name.c_str(), &ip6) == 1;
  const int match = ip ? X509_check_ip_asc(leaf, name.c_str(), 0)
                       : X509_check_host(leaf, name.c_str(), name.size(), 0, nullptr);
  if (match != 1) {
    const std::string names = names_of(leaf);
    return fmt::format(
        "the server's certificate {} is not for '{}' (it names {}): connect by a name it "
        "holds, or give that name with --server-name ({})",
        name_text(X509_get_subject_name(leaf)), name, names.empty() ? "no DNS name or IP" : names,
        kTlsServerNameEnv);
  }
  return "";
}

}  // namespace

std::string diagnose_tls(const std::string& address, const TlsOptions& tls, Duration timeout) {
  const auto [host, port] = split_address(address);
  const std::string name = tls.server_name.empty() ? host : tls.server_name;
  const int fd = connect_tcp(host, port, timeout);
  if (fd < 0) return "";
  CtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // checked below, with reasons
  if (!tls.cert_file.empty()) {
    SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str());
    SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM);
  }
  const unsigned char alpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), alpn, sizeof(alpn));
  SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  SSL_set_tlsext_host_name(ssl.get(), name.c_str());
  std::string why;
  if (!tls_active(tls)) {
    // A plaintext client: only whether the server answers TLS matters.
    const bool answered = SSL_connect(ssl.get()) == 1 || contains(ssl_reason(), "alert");
    if (answered) {
      why = fmt::format(
          "the server at {} speaks TLS: connect with --tls ({}=1), and --ca-file for a private CA",
          address, kTlsEnv);
    }
  } else if (SSL_connect(ssl.get()) != 1) {
    const std::string reason = ssl_reason();
    if (contains(reason, "wrong version number") || contains(reason, "packet length too long") ||
        contains(reason, "record layer failure") || reason.empty()) {
      why = fmt::format(
          "the server at {} does not speak TLS{}: it may listen in plaintext (no api.tls), then "
          "connect without --tls",
          address, reason.empty() ? "" : " (" + reason + ")");
    } else {
      why = contains(reason, "alert") ? refused_client("TLS alert: " + reason, tls)
                                      : fmt::format("the TLS handshake failed: {}", reason);
    }
  } else {
    why = check_server_chain(ssl.get(), tls, name);
    if (why.empty()) {
      // TLS 1.3: a refused client certificate arrives as an alert after the
      // handshake, before the server's first HTTP/2 frame.
      // gRPC's server sends no alert: it closes the connection, where an
      // accepting one sends its first HTTP/2 frame at once.
      char byte = 0;
      errno = 0;
      const int n = SSL_read(ssl.get(), &byte, 1);
      const int error = n <= 0 ? SSL_get_error(ssl.get(), n) : SSL_ERROR_NONE;
      const int saved_errno = errno;
      const std::string reason = n <= 0 ? ssl_reason() : std::string();
      const bool closed =
          error == SSL_ERROR_ZERO_RETURN ||
          (error == SSL_ERROR_SYSCALL && saved_errno != EAGAIN && saved_errno != EWOULDBLOCK) ||
          contains(reason, "unexpected eof");
      if (contains(reason, "alert")) {
        why = refused_client("TLS alert: " + reason, tls);
      } else if (closed) {
        why = refused_client("it closed the connection right after the handshake", tls);
      }
    }
  }
  SSL_shutdown(ssl.get());
  ssl.reset();
  close(fd);
  ERR_clear_error();
  return why;
}

}  // namespace dex
