// SignUp with e-mail verification: SendEmail, then AwaitVerification waits
// AnyOf(the code on Channel "verify", a resend Timer); on the Timer it sends
// again (at most maxSends e-mails, then the Flow fails); a wrong code waits again.
//
// Input: { email: "ann@example.com", code: "123456", resendMs: 600000, maxSends: 3 }
import { Channel, Flow, forceFail, goTo, gracefulComplete, Timer, Wait, type Step, type StepContext } from "dex-sdk";

export interface SignUpState {
  email: string;
  code: string;
  resendMs?: number;
  maxSends?: number;
  sends?: number;
  wrongCodes?: number;
}

export const verify = new Channel<{ code: string }>("verify");

const sendEmail: Step<SignUpState> = {
  type: "SendEmail",
  execute(ctx) {
    // A real Step would call the mail service here (idempotently: a retried
    // attempt may send the same e-mail twice).
    return goTo<SignUpState>("AwaitVerification", { ...ctx.input, sends: (ctx.input.sends ?? 0) + 1 });
  },
};

class AwaitVerification implements Step<SignUpState> {
  readonly type = "AwaitVerification";

  waitFor(ctx: StepContext<SignUpState>) {
    return Wait.anyOf(verify.forOne(), Timer.after(ctx.input.resendMs ?? 600_000));
  }

  execute(ctx: StepContext<SignUpState>) {
    const s = ctx.input;
    const sends = s.sends ?? 0;
    if (ctx.timerFired()) {
      if (sends >= (s.maxSends ?? 3)) return forceFail(`not verified after ${sends} e-mails`);
      return goTo(sendEmail, s);
    }
    const [typed] = ctx.messages(verify);
    if (typed?.code !== s.code) return goTo<SignUpState>(this, { ...s, wrongCodes: (s.wrongCodes ?? 0) + 1 });
    return gracefulComplete({ verified: s.email, sends, wrongCodes: s.wrongCodes ?? 0 });
  }
}

export const signUp = new Flow({
  type: "SignUp",
  startStep: sendEmail,
  steps: [sendEmail, new AwaitVerification()],
  channels: [verify],
});
