// A test stand-in for one server process: a RoleBoard (the role the node
// loop would write) and the ApiServer that reads it. Role changes wait until
// the API applied them, so a test's next call sees the new role.
#pragma once

#include <memory>
#include <string>

#include "api/api_server.h"
#include "node/role_board.h"

namespace dex {

class ApiProcess {
 public:
  static StatusOr<std::unique_ptr<ApiProcess>> start(const ApiServerOptions& options) {
    auto process = std::unique_ptr<ApiProcess>(new ApiProcess());
    auto api = ApiServer::start(options, process->role_);
    if (!api.is_ok()) return api.status();
    process->api_ = std::move(api).value();
    return process;
  }
  void set_active(Engine* engine, NodeIdentity identity) {
    role_.set_active(engine, std::move(identity));
    (void)api_->wait_role_applied(seconds(5));
  }
  void set_inactive(std::string why) {
    role_.set_inactive(std::move(why));
    (void)api_->wait_role_applied(seconds(5));
  }
  int port() const { return api_->port(); }
  void shutdown(Duration grace) { api_->shutdown(grace); }
  RoleBoard& role() { return role_; }

 private:
  ApiProcess() = default;
  RoleBoard role_;
  std::unique_ptr<ApiServer> api_;
};

}  // namespace dex
