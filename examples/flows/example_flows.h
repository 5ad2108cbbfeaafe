// The dex example Flows (examples/README.md, "dex Flows"), written with the
// C++ SDK (src/sdk/flow.h):
//  - OrderProcessing: Charge (retried) -> Ship, which waits for the seller's
//    approval or a reminder Timer and loops on the Timer; Ship's exhausted
//    retries proceed to Refund. Attribute `order-status`; RPCs `approve`
//    (publishes the seller's approval) and `describe`. Indexed Attributes
//    for search: `order-status` (as OrderStatus), and `customer`, `items`,
//    `total`, `placed-at` (as PlacedAt) and `tags`, which clients set.
//  - MoneyTransfer: Debit (lock "balance") -> Credit, whose exhausted retries
//    proceed to Compensate (lock "balance"), which gives the amount back;
//    Attributes `balance` and `transferred`, RPC `balance`.
//  - SignUp: SendEmail -> AwaitVerification, which waits for the code or a
//    resend Timer (resend loop, at most max_sends e-mails).
//  - ParallelQuotes: Start fans out to three Quote Steps and Pick (GoToMulti);
//    Pick waits AllOf two quotes and a short settle Timer, then completes with
//    the cheapest and cancels the Quote still running.
//  - OneStep, ThreeSteps (pipelines.cc): Execute-only Steps in a row, each
//    taking a set work time; the benchmarks' workload.
//  - E2EThreeSteps, E2ESlowStep, E2ESlowStepNoRetry, E2EIdle (pipelines.cc):
//    the HA end-to-end tests' Flows (tests/server/), with the retry policies
//    and timeouts those tests rely on.
//  - AttrRpcDemo: Attribute `status`, AttributeMap `counts`, RPCs `describe`
//    and `set-status`; its Step writes status and waits on Channel `done`
//    (dexcli's Attribute and RPC tests).
//  - E2ECounter: RPC `add` sums into Attribute `total` under lock key
//    "counter", once per id (AttributeMap `applied`); Count waits on Channel
//    `stop` and completes with the total (the failover tests).
//  - FanOut (fan_out.cc): Fan waits AllOf up to 100 SubFlows of Square, each
//    squaring its input and writing Attribute `square`, and sums them.
//  - RetryOnce (retry_once.cc): fails its first run on purpose; started with a
//    Flow retry policy, its second run completes.
// Inputs are JSON objects; every duration is in milliseconds so that tests can
// shorten them.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "sdk/flow.h"

namespace dex::examples {

std::shared_ptr<Flow> order_processing();
std::shared_ptr<Flow> signup();
std::shared_ptr<Flow> parallel_quotes();
std::shared_ptr<Flow> money_transfer();
std::shared_ptr<Flow> attr_rpc_demo();
std::shared_ptr<Flow> e2e_counter();
std::shared_ptr<Flow> fan_out();
std::shared_ptr<Flow> square();  // FanOut's child
std::shared_ptr<Flow> retry_once();
// `charge_bug`: Charge runs the buggy code (every run fails there).
std::shared_ptr<Flow> checkout(bool charge_bug = false);
// Every Flow above (the pipelines' Steps take `work_time` each; Checkout's
// Charge has the bug with `charge_bug`).
std::vector<std::shared_ptr<Flow>> all_flows(
    std::chrono::milliseconds work_time = std::chrono::milliseconds(0), bool charge_bug = false);
std::vector<std::shared_ptr<Flow>> pipelines(std::chrono::milliseconds work_time);
// A Flow `type` of Execute-only Steps named `steps`, in that order: each goes
// to the next with its input (after `work_time`), the last completes with it.
// The benchmarks build theirs with it (bench/peers_worker.cc, dex_flows_bench).
std::shared_ptr<Flow> pipeline(std::string type, std::vector<std::string> steps,
                               std::chrono::milliseconds work_time);

}  // namespace dex::examples
