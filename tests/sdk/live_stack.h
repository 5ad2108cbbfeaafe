// The end-to-end fixture of the SDK tests: a Worker hosting the test's Flows
// and a Client, both against a real ApiServer over a real Engine (NodeEngine)
// on loopback. A test derives from LiveStackTest and names its Flows.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api_process.h"
#include "node_engine.h"
#include "sdk/client.h"
#include "sdk/flow.h"
#include "sdk/worker.h"

namespace dex {

class LiveStackTest : public ::testing::Test {
 protected:
  static constexpr Duration kWait = seconds(30);

  // The Flows the Worker hosts.
  virtual std::vector<std::shared_ptr<Flow>> flows() const = 0;
  // The Worker's options past the server's address (its ID, its capacity).
  virtual void configure(WorkerOptions&) const {}

  void SetUp() override {
    ApiServerOptions options;
    options.listen = "127.0.0.1:0";
    auto api = ApiProcess::start(options);
    ASSERT_TRUE(api.is_ok()) << api.status().to_string();
    api_ = std::move(api).value();
    api_->set_active(&node_.engine(), {"n1", Epoch(1), "p1"});
    address_ = "127.0.0.1:" + std::to_string(api_->port());
    WorkerOptions wo;
    wo.server_address = address_;
    wo.worker_id = "w-live";
    wo.shutdown_timeout = seconds(3);
    configure(wo);
    worker_ = std::make_unique<Worker>(wo);
    for (auto& f : flows()) worker_->host(std::move(f));
    run_ = std::async(std::launch::async, [this] { return worker_->run(); });
    ClientOptions co;
    co.server_address = address_;
    co.timeout = seconds(10);
    client_ = std::make_unique<Client>(co);
    // Bounded: 4 s of 10 ms polls.
    for (int i = 0; i < 400 && worker_->stats().streams_accepted == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(worker_->stats().streams_accepted, 1u) << "the Worker did not connect";
  }

  void TearDown() override {
    if (worker_) {
      worker_->shutdown();
      EXPECT_EQ(run_.wait_for(kWait), std::future_status::ready);
    }
    if (api_) api_->shutdown(seconds(0));
  }

  NodeEngine node_;
  std::unique_ptr<ApiProcess> api_;
  std::string address_;  // the ApiServer's, "127.0.0.1:<port>"
  std::unique_ptr<Worker> worker_;
  std::future<Status> run_;
  std::unique_ptr<Client> client_;
};

}  // namespace dex
