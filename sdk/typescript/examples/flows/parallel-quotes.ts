// ParallelQuotes: Start asks three carriers at once (goToMulti) and starts
// Pick; Pick waits AllOf(two quotes on a Channel, a short settle Timer), then
// completes with the cheapest and cancels the Quote still waiting (the
// slowest carrier).
//
// Input: { parcel: "p-1", delaysMs: { A: 100, B: 200, C: 600000 }, prices: { A: 12, B: 9, C: 5 }, settleMs: 100 }
import {
  Channel,
  deadEnd,
  Flow,
  goToMulti,
  gracefulComplete,
  Timer,
  Wait,
  type Step,
  type StepContext,
} from "dex-sdk";

export interface QuoteRequest {
  parcel: string;
  delaysMs: Record<string, number>;
  prices: Record<string, number>;
  settleMs?: number;
  carrier?: string;
}

export interface Quote {
  carrier: string;
  price: number;
}

export const quotes = new Channel<Quote>("quotes");

const CARRIERS = ["A", "B", "C"];

const start: Step<QuoteRequest> = {
  type: "Start",
  execute(ctx) {
    return goToMulti(
      ...CARRIERS.map((carrier) => ({ step: "Quote", input: { ...ctx.input, carrier } })),
      { step: "Pick", input: ctx.input },
    );
  },
};

// A carrier answers after its delay (a durable Timer stands in for the call).
const quote: Step<QuoteRequest> = {
  type: "Quote",
  waitFor(ctx) {
    return Wait.anyOf(Timer.after(ctx.input.delaysMs[ctx.input.carrier ?? ""] ?? 0));
  },
  execute(ctx) {
    const carrier = ctx.input.carrier ?? "";
    ctx.publish(quotes, { carrier, price: ctx.input.prices[carrier] ?? 0 });
    return deadEnd();
  },
};

class Pick implements Step<QuoteRequest> {
  readonly type = "Pick";
  waitFor(ctx: StepContext<QuoteRequest>) {
    return Wait.allOf(quotes.forN(2), Timer.after(ctx.input.settleMs ?? 100));
  }
  execute(ctx: StepContext<QuoteRequest>) {
    const best = ctx.messages(quotes).reduce((a, b) => (b.price < a.price ? b : a));
    return gracefulComplete({ parcel: ctx.input.parcel, winner: best }).cancelSteps(quote);
  }
}

export const parallelQuotes = new Flow({
  type: "ParallelQuotes",
  startStep: start,
  steps: [start, quote, new Pick()],
  channels: [quotes],
});
