// What waitFor returns: a Wait over conditions, each a durable Timer (here),
// a Channel condition (channels.ts) or a SubFlow (subflows.ts), optionally
// named by an ID.
import type { WireCondition, WireWait } from "../proto";
import { checkDuration, checkName, FLOW_LIMITS, invalid } from "./checks";

/** One condition of a Wait: a Timer, a Channel condition or a SubFlow, optionally with an ID. */
export class Condition {
  /** The condition as the wire names it. */
  readonly spec: WireCondition;
  private constructor(spec: WireCondition) {
    this.spec = spec;
  }
  /** @internal */
  static of(spec: WireCondition, id: string | undefined): Condition {
    const c = new Condition(spec);
    return id === undefined ? c : c.withId(id);
  }
  /** The condition ID (required in Wait.anyCombinationOf, optional elsewhere). */
  get id(): string {
    return this.spec.conditionId;
  }
  /** The same condition named `id`. */
  withId(id: string): Condition {
    return new Condition({ ...this.spec, conditionId: checkName(id, "a condition ID") });
  }
}

/** Durable Timers: they fire on the server, whatever happens to Workers. */
export const Timer = {
  /** Fires `ms` after the wait is recorded. */
  after(ms: number, id?: string): Condition {
    return Condition.of({ conditionId: "", timer: { durationMs: checkDuration(ms, "Timer.after") } }, id);
  },
  /** Fires at a wall-clock time (a Date or Unix milliseconds); a time already past fires at once. */
  at(when: Date | number, id?: string): Condition {
    const ms = when instanceof Date ? when.getTime() : when;
    if (typeof ms !== "number" || !Number.isFinite(ms)) throw invalid(`Timer.at needs a valid time, not ${String(when)}`);
    return Condition.of({ conditionId: "", timer: { atUnixMs: Math.round(ms) } }, id);
  },
};

/** Throws unless every combination is a non-empty list of the wait's condition IDs. */
function checkCombinations(combinations: string[][], conditions: Condition[]): void {
  const missing = conditions.findIndex((c) => c.id === "");
  if (missing >= 0) {
    throw invalid(
      `Wait.anyCombinationOf: condition ${missing + 1} has no ID; every condition needs one ` +
        "(condition.withId(id), or the id argument of Timer.after, channel.forOne, subFlow.start, ...)",
    );
  }
  if (!Array.isArray(combinations) || combinations.length === 0) {
    throw invalid("Wait.anyCombinationOf needs at least one combination of condition IDs");
  }
  const known = new Set(conditions.map((c) => c.id));
  combinations.forEach((group, i) => {
    if (!Array.isArray(group) || group.length === 0) {
      throw invalid(`Wait.anyCombinationOf: combination ${i + 1} is empty`);
    }
    for (const id of group) {
      if (!known.has(id)) {
        throw invalid(
          `Wait.anyCombinationOf: combination ${i + 1} names '${id}', which is not a condition ID of this wait (${[
            ...known,
          ].join(", ")})`,
        );
      }
    }
  });
}

/** What waitFor returns: when the Step's execute may run, and what it takes. */
export class Wait {
  readonly spec: WireWait;
  private constructor(spec: WireWait) {
    this.spec = spec;
  }

  private static of(kind: string, what: string, conditions: Condition[]): Wait {
    if (conditions.length === 0) {
      throw invalid(`${what} needs at least one condition (a Timer, a Channel condition or a SubFlow); Wait.skip() waits for nothing`);
    }
    if (conditions.length > FLOW_LIMITS.conditionsPerWait) {
      throw invalid(`${what} has ${conditions.length} conditions; the limit is ${FLOW_LIMITS.conditionsPerWait}`);
    }
    conditions.forEach((c, i) => {
      if (!(c instanceof Condition)) throw invalid(`${what}: argument ${i + 1} is not a Condition`);
    });
    const ids = conditions.map((c) => c.id).filter((id) => id !== "");
    const twice = ids.find((id, i) => ids.indexOf(id) !== i);
    if (twice !== undefined) throw invalid(`${what}: the condition ID '${twice}' is used twice`);
    return new Wait({ kind, conditions: conditions.map((c) => c.spec), combinations: [] });
  }

  /** Met when any condition is (the first met, in order, wins and alone takes messages). */
  static anyOf(...conditions: Condition[]): Wait {
    return Wait.of("ANY_OF", "Wait.anyOf", conditions);
  }
  /** Met when every condition is. */
  static allOf(...conditions: Condition[]): Wait {
    return Wait.of("ALL_OF", "Wait.allOf", conditions);
  }
  /**
   * An OR of AND groups: met when every condition of one combination is (the
   * first such combination wins). Every condition needs an ID (withId, or
   * the id argument of Timer.after, forOne, ...); combinations name them.
   */
  static anyCombinationOf(combinations: string[][], ...conditions: Condition[]): Wait {
    const w = Wait.of("ANY_COMBINATION_OF", "Wait.anyCombinationOf", conditions);
    checkCombinations(combinations, conditions);
    return new Wait({ ...w.spec, combinations: combinations.map((g) => ({ conditionIds: [...g] })) });
  }
  /** No waiting: execute runs at once. */
  static skip(): Wait {
    return new Wait({ kind: "SKIP", conditions: [], combinations: [] });
  }
}
