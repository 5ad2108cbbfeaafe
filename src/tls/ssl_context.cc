#include "tls/ssl_context.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <spdlog/spdlog.h>

namespace dex::tls {

// One generation's certificate, key and CA as OpenSSL objects.
struct ReloadingSslContext::Parsed {
  X509* leaf = nullptr;
  EVP_PKEY* key = nullptr;
  STACK_OF(X509) * chain = nullptr;  // the intermediates after the leaf
  X509_STORE* ca_store = nullptr;    // client CAs; null without clientCaFile
  STACK_OF(X509_NAME) * ca_names = nullptr;
  ~Parsed() {
    X509_free(leaf);
    EVP_PKEY_free(key);
    sk_X509_pop_free(chain, X509_free);
    X509_STORE_free(ca_store);
    sk_X509_NAME_pop_free(ca_names, X509_NAME_free);
  }
};

namespace {

using Parsed = ReloadingSslContext::Parsed;

// The material was checked by load_server_tls, so parsing it cannot fail
// short of memory; a null result refuses the handshake.
std::shared_ptr<const Parsed> parse(const ServerTlsMaterial& m) {
  auto p = std::make_shared<Parsed>();
  BIO* bio = BIO_new_mem_buf(m.cert_chain_pem.data(), static_cast<int>(m.cert_chain_pem.size()));
  p->leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  p->chain = sk_X509_new_null();
  while (X509* next = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    sk_X509_push(p->chain, next);
  }
  BIO_free(bio);
  bio = BIO_new_mem_buf(m.key_pem.data(), static_cast<int>(m.key_pem.size()));
  p->key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (!m.client_ca_pem.empty()) {
    p->ca_store = X509_STORE_new();
    p->ca_names = sk_X509_NAME_new_null();
    bio = BIO_new_mem_buf(m.client_ca_pem.data(), static_cast<int>(m.client_ca_pem.size()));
    while (X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
      X509_STORE_add_cert(p->ca_store, ca);
      sk_X509_NAME_push(p->ca_names, X509_NAME_dup(X509_get_subject_name(ca)));
      X509_free(ca);
    }
    BIO_free(bio);
  }
  ERR_clear_error();
  if (p->leaf == nullptr || p->key == nullptr) return nullptr;
  return p;
}

int on_client_hello(SSL* ssl, int* alert, void* arg) {
  auto parsed = static_cast<ReloadingSslContext*>(arg)->parsed();
  if (parsed == nullptr ||
      SSL_use_cert_and_key(ssl, parsed->leaf, parsed->key, parsed->chain, 1) != 1) {
    *alert = SSL_AD_INTERNAL_ERROR;
    return SSL_CLIENT_HELLO_ERROR;
  }
  if (parsed->ca_store != nullptr) {
    SSL_set1_verify_cert_store(ssl, parsed->ca_store);
    SSL_set_client_CA_list(ssl, SSL_dup_CA_list(parsed->ca_names));
  }
  return SSL_CLIENT_HELLO_SUCCESS;
}

}  // namespace

ReloadingSslContext::ReloadingSslContext(std::shared_ptr<TlsWatcher> watcher)
    : watcher_(std::move(watcher)) {}

ReloadingSslContext::~ReloadingSslContext() = default;

std::shared_ptr<const Parsed> ReloadingSslContext::parsed() {
  const uint64_t generation = watcher_->generation();
  std::lock_guard<std::mutex> lock(mu_);
  if (parsed_generation_ != generation || parsed_ == nullptr) {
    parsed_ = parse(*watcher_->current());
    parsed_generation_ = generation;
  }
  return parsed_;
}

bool ReloadingSslContext::setup(SSL_CTX& ctx) {
  if (SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION) != 1) return false;
  SSL_CTX_set_options(&ctx, SSL_OP_NO_RENEGOTIATION);
  switch (watcher_->files().client_auth) {
    case ClientAuth::kNone:
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_NONE, nullptr);
      break;
    case ClientAuth::kOptional:
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER, nullptr);
      break;
    case ClientAuth::kRequired:
      SSL_CTX_set_verify(&ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  SSL_CTX_set_client_hello_cb(&ctx, on_client_hello, this);
  if (parsed() == nullptr) {
    spdlog::error("{}: the certificate or key could not be loaded into OpenSSL",
                  watcher_->files().key);
    return false;
  }
  return true;
}

}  // namespace dex::tls
