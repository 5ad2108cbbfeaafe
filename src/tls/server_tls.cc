#include "tls/server_tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace dex::tls {

std::string_view client_auth_name(ClientAuth auth) {
  switch (auth) {
    case ClientAuth::kNone:
      return "none";
    case ClientAuth::kOptional:
      return "optional";
    case ClientAuth::kRequired:
      return "required";
  }
  return "none";
}

std::optional<ClientAuth> parse_client_auth(std::string_view text) {
  if (text == "none") return ClientAuth::kNone;
  if (text == "optional") return ClientAuth::kOptional;
  if (text == "required") return ClientAuth::kRequired;
  return std::nullopt;
}

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;

Status bad(const ServerTlsFiles& files, std::string_view field, const std::string& file,
           std::string_view what) {
  return Status::invalid_argument(fmt::format("{}.{}: '{}' {}", files.key, field, file, what));
}

// The whole file, or why not. Bounded by kTlsFileBytesMax.
StatusOr<std::string> read_small_file(const ServerTlsFiles& files, std::string_view field,
                                      const std::string& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (!std::filesystem::exists(status)) return bad(files, field, file, "does not exist");
  if (!std::filesystem::is_regular_file(status)) {
    return bad(files, field, file, "is not a regular file");
  }
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) return bad(files, field, file, fmt::format("cannot be read: {}", ec.message()));
  if (size > kTlsFileBytesMax) {
    return bad(files, field, file, fmt::format("is larger than {} bytes", kTlsFileBytesMax));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in.is_open()) {
    return bad(files, field, file, fmt::format("cannot be opened: {}", std::strerror(errno)));
  }
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return bad(files, field, file, "cannot be read");
  return text;
}

// Every certificate of a PEM text, in order.
std::vector<X509Ptr> parse_certificates(const std::string& pem) {
  std::vector<X509Ptr> out;
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (true) {
    X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (cert == nullptr) break;
    out.emplace_back(cert);
  }
  ERR_clear_error();  // the loop ends on "no start line"
  return out;
}

std::string time_text(const ASN1_TIME* time) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  ASN1_TIME_print(bio.get(), time);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string subject_text(X509* cert) {
  char buf[512];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof(buf));
  return buf;
}

// The leaf's validity now: an expired certificate would fail every client,
// so it is refused at startup and a rotation to it keeps the previous one.
Status check_validity(const ServerTlsFiles& files, X509* leaf) {
  if (X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0) {
    return bad(files, "certFile", files.cert_file,
               fmt::format("holds a certificate that expired on {} ({})",
                           time_text(X509_get0_notAfter(leaf)), subject_text(leaf)));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(leaf)) >= 0) {
    return bad(files, "certFile", files.cert_file,
               fmt::format("holds a certificate that is not valid before {} ({})",
                           time_text(X509_get0_notBefore(leaf)), subject_text(leaf)));
  }
  return Status::ok();
}

}  // namespace

Status check_server_tls_settings(const ServerTlsFiles& files) {
  const bool ca = !files.client_ca_file.empty();
  if (files.cert_file.empty() != files.key_file.empty()) {
    return Status::invalid_argument(
        fmt::format("{}: certFile and keyFile go together: set both or neither", files.key));
  }
  if (!files.enabled() && (ca || files.client_auth != ClientAuth::kNone)) {
    return Status::invalid_argument(fmt::format(
        "{}: clientCaFile and clientAuth need certFile and keyFile (TLS on the listener)",
        files.key));
  }
  if (files.client_auth != ClientAuth::kNone && !ca) {
    return Status::invalid_argument(
        fmt::format("{}.clientAuth {} needs {}.clientCaFile: the CAs that sign client certificates",
                    files.key, client_auth_name(files.client_auth), files.key));
  }
  if (files.client_auth == ClientAuth::kNone && ca) {
    return Status::invalid_argument(fmt::format(
        "{}.clientCaFile is set but {}.clientAuth is none: client certificates would never be "
        "asked for; set clientAuth required (or optional), or remove clientCaFile",
        files.key, files.key));
  }
  return Status::ok();
}

StatusOr<ServerTlsMaterial> load_server_tls(const ServerTlsFiles& files) {
  if (Status s = check_server_tls_settings(files); !s.is_ok()) return s;
  ServerTlsMaterial m;
  auto chain = read_small_file(files, "certFile", files.cert_file);
  if (!chain.is_ok()) return chain.status();
  m.cert_chain_pem = std::move(chain).value();
  auto certs = parse_certificates(m.cert_chain_pem);
  if (certs.empty()) return bad(files, "certFile", files.cert_file, "holds no PEM certificate");
  auto key_text = read_small_file(files, "keyFile", files.key_file);
  if (!key_text.is_ok()) return key_text.status();
  m.key_pem = std::move(key_text).value();
  std::unique_ptr<BIO, BioFree> bio(
      BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size())));
  // An empty passphrase callback: an encrypted key fails instead of prompting.
  std::unique_ptr<EVP_PKEY, KeyFree> key(PEM_read_bio_PrivateKey(
      bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  ERR_clear_error();
  if (key == nullptr) {
    return bad(files, "keyFile", files.key_file,
               "holds no PEM private key (or an encrypted one, which is not supported)");
  }
  if (X509_check_private_key(certs.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return bad(files, "keyFile", files.key_file,
               fmt::format("does not match the certificate in {}.certFile '{}' ({})", files.key,
                           files.cert_file, subject_text(certs.front().get())));
  }
  if (Status s = check_validity(files, certs.front().get()); !s.is_ok()) return s;
  m.subject = subject_text(certs.front().get());
  m.not_after = time_text(X509_get0_notAfter(certs.front().get()));
  if (!files.client_ca_file.empty()) {
    auto ca = read_small_file(files, "clientCaFile", files.client_ca_file);
    if (!ca.is_ok()) return ca.status();
    m.client_ca_pem = std::move(ca).value();
    if (parse_certificates(m.client_ca_pem).empty()) {
      return bad(files, "clientCaFile", files.client_ca_file, "holds no PEM certificate");
    }
  }
  return m;
}

std::string describe_server_tls(const ServerTlsFiles& files) {
  if (!files.enabled()) return fmt::format("{}: off (plaintext)", files.key);
  std::string out = fmt::format("{}: certificate {} (key {}), TLS 1.2 or later", files.key,
                                files.cert_file, files.key_file);
  if (files.client_auth == ClientAuth::kNone) return out + ", no client certificates";
  return out + fmt::format(", client certificates {} (CA {})",
                           files.client_auth == ClientAuth::kRequired ? "required" : "optional",
                           files.client_ca_file);
}

}  // namespace dex::tls
