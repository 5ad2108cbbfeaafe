// SignUp with e-mail verification: send a code, then wait AnyOf(the code on
// Channel "verify", a resend Timer); on the Timer send again, at most
// max_sends e-mails; a wrong code waits again.
//
// Input: {"email": "ann@example.com", "code": "123456", "resend_ms": 600000, "max_sends": 3}
#include "example_flows.h"

namespace dex::examples {
namespace {

const Channel kVerify("verify");

class SendEmail final : public Step {
 public:
  std::string type() const override { return "SendEmail"; }
  StepDecision execute(Context& ctx) override {
    json signup = ctx.input();
    // A real Step would call the mail service here (idempotently: a retried
    // attempt may send the same e-mail twice).
    signup["sends"] = signup.value("sends", 0) + 1;
    return StepDecision::go_to("AwaitVerification", signup);
  }
};

class AwaitVerification final : public WaitingStep {
 public:
  std::string type() const override { return "AwaitVerification"; }
  Wait wait_for(Context& ctx) override {
    const auto resend = std::chrono::milliseconds(ctx.input().value("resend_ms", 600'000));
    return Wait::any_of({kVerify.for_one(), Timer::after(resend)});
  }
  StepDecision execute(Context& ctx) override {
    json signup = ctx.input();
    if (ctx.timer_fired()) {
      if (signup.value("sends", 0) >= signup.value("max_sends", 3))
        return StepDecision::force_fail("not verified after " +
                                        std::to_string(signup.value("sends", 0)) + " e-mails");
      return StepDecision::go_to("SendEmail", signup);
    }
    const auto codes = ctx.messages(kVerify);
    if (codes.at(0).value("code", "") != signup.value("code", "")) {
      signup["wrong_codes"] = signup.value("wrong_codes", 0) + 1;
      return StepDecision::go_to("AwaitVerification", signup);
    }
    return StepDecision::graceful_complete({{"verified", signup.value("email", "")},
                                            {"sends", signup["sends"]},
                                            {"wrong_codes", signup.value("wrong_codes", 0)}});
  }
};

class SignUp final : public Flow {
 public:
  std::string type() const override { return "SignUp"; }
  std::string start_step() const override { return "SendEmail"; }
  std::vector<std::shared_ptr<Step>> steps() const override {
    return {std::make_shared<SendEmail>(), std::make_shared<AwaitVerification>()};
  }
  std::vector<Channel> channels() const override { return {kVerify}; }
};

}  // namespace

std::shared_ptr<Flow> signup() { return std::make_shared<SignUp>(); }

}  // namespace dex::examples
