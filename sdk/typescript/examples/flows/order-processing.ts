// OrderProcessing: Charge with retries; Ship waits AnyOf(the seller's approval
// on a Channel, a reminder Timer) and loops on the Timer; once Ship's execute
// retries are used up the Flow proceeds to Refund (a recovery Step).
//
// Input: { order: "o-1", amount: 42, failCharges: 0, reminderMs: 86400000, failShipping: false }
import { Channel, Flow, goTo, gracefulComplete, Timer, Wait, type Step, type StepContext } from "dex-sdk";

export interface Order {
  order: string;
  amount: number;
  /** The payment provider declines this many attempts first. */
  failCharges?: number;
  /** The reminder Timer. Default 24 h. */
  reminderMs?: number;
  /** The carrier refuses the parcel: Ship fails and the order is refunded. */
  failShipping?: boolean;
  chargedOnAttempt?: number;
  reminders?: number;
}

export interface Approval {
  seller: string;
}

export const sellerApproval = new Channel<Approval>("seller-approval");

class Charge implements Step<Order> {
  readonly type = "Charge";
  readonly options = { execute: { retry: { initialIntervalMs: 200, maximumAttempts: 4 } } };

  execute(ctx: StepContext<Order>) {
    // A payment provider that declines the first `failCharges` attempts.
    if (ctx.attempt <= (ctx.input.failCharges ?? 0)) {
      throw new Error(`the card was declined (attempt ${ctx.attempt})`);
    }
    return goTo<Order>(ship, { ...ctx.input, chargedOnAttempt: ctx.attempt, reminders: 0 });
  }
}

class Ship implements Step<Order> {
  readonly type = "Ship";
  readonly options = { execute: { retry: { initialIntervalMs: 100, maximumAttempts: 2 }, recoveryStep: "Refund" } };

  waitFor(ctx: StepContext<Order>) {
    return Wait.anyOf(sellerApproval.forOne(), Timer.after(ctx.input.reminderMs ?? 86_400_000));
  }

  execute(ctx: StepContext<Order>) {
    const order = ctx.input;
    if (ctx.timerFired()) {
      // No approval yet: remind the seller and wait again.
      return goTo<Order>(this, { ...order, reminders: (order.reminders ?? 0) + 1 });
    }
    if (order.failShipping === true) throw new Error("the carrier refused the parcel");
    const [approval] = ctx.messages(sellerApproval);
    return gracefulComplete({
      order: order.order,
      status: "shipped",
      approvedBy: approval,
      reminders: order.reminders ?? 0,
      chargedOnAttempt: order.chargedOnAttempt,
    });
  }
}

class Refund implements Step<Order> {
  readonly type = "Refund";
  execute(ctx: StepContext<Order>) {
    return gracefulComplete({ order: ctx.input.order, status: "refunded", reason: ctx.recoveryError });
  }
}

const ship = new Ship();

export const orderProcessing = new Flow({
  type: "OrderProcessing",
  startStep: "Charge",
  steps: [new Charge(), ship, new Refund()],
  channels: [sellerApproval],
});
