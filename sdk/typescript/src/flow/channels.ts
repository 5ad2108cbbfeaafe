// A Flow's persistence schema: Channels (durable FIFO queues of one run) and
// ChannelMaps (one queue per runtime key), and the conditions a Wait puts on
// them.
import { checkCount, checkName, invalid } from "./checks";
import { jsonCodec, type Codec } from "./codec";
import { Condition } from "./waits";

export interface ChannelOptions<T> {
  /** How messages become bytes. Default: JSON. */
  codec?: Codec<T>;
}

/**
 * A durable FIFO queue of one run, declared in its Flow's `channels`. Clients
 * publish to it (Client.publishToChannel), Steps publish with ctx.publish and
 * consume with a Channel condition in waitFor.
 */
export class Channel<T = unknown> {
  readonly name: string;
  /** "" unless this is an instance of a ChannelMap. */
  readonly instanceKey: string;
  readonly codec: Codec<T>;
  /** True for ChannelMap.instance(key). */
  readonly isMapInstance: boolean;

  constructor(name: string, options: ChannelOptions<T> = {}) {
    this.name = checkName(name, "a Channel name");
    this.codec = options.codec ?? (jsonCodec as Codec<T>);
    this.instanceKey = "";
    this.isMapInstance = false;
  }

  /** @internal */
  static instanceOf<T>(map: ChannelMap<T>, key: string): Channel<T> {
    const c = new Channel<T>(map.name, { codec: map.codec });
    (c as { instanceKey: string }).instanceKey = checkName(key, `an instance key of ChannelMap '${map.name}'`);
    (c as { isMapInstance: boolean }).isMapInstance = true;
    return c;
  }

  private condition(match: string, min: number, max: number, id: string | undefined): Condition {
    return Condition.of(
      { conditionId: "", channel: { channel: this.name, instanceKey: this.instanceKey, match, min, max } },
      id,
    );
  }
  /** Met when at least one message is queued; takes one. */
  forOne(id?: string): Condition {
    return this.condition("FOR_ONE", 0, 0, id);
  }
  /** Met when at least `n` are queued; takes `n`. */
  forN(n: number, id?: string): Condition {
    if (checkCount(n, "forN(n)") < 1) throw invalid("forN(n) needs n >= 1");
    return this.condition("FOR_N", n, 0, id);
  }
  /** Met when at least `n` are queued; takes every queued message. */
  atLeast(n: number, id?: string): Condition {
    return this.condition("AT_LEAST", checkCount(n, "atLeast(n)"), 0, id);
  }
  /** Met at once, even when empty; takes up to `n`. */
  atMost(n: number, id?: string): Condition {
    if (checkCount(n, "atMost(n)") < 1) throw invalid("atMost(n) needs n >= 1");
    return this.condition("AT_MOST", 0, n, id);
  }
  /** Met when at least `min` are queued; takes up to `max`. */
  atLeastAtMost(min: number, max: number, id?: string): Condition {
    checkCount(min, "atLeastAtMost(min)");
    checkCount(max, "atLeastAtMost(max)");
    if (max < 1 || min > max) throw invalid(`atLeastAtMost(${min}, ${max}) needs 1 <= max and min <= max`);
    return this.condition("AT_LEAST_AT_MOST", min, max, id);
  }
}

/** Channels by a runtime key: one FIFO queue per instance key (declared once, by name). */
export class ChannelMap<T = unknown> {
  readonly name: string;
  readonly codec: Codec<T>;
  constructor(name: string, options: ChannelOptions<T> = {}) {
    this.name = checkName(name, "a ChannelMap name");
    this.codec = options.codec ?? (jsonCodec as Codec<T>);
  }
  /** The queue of `key`. */
  instance(key: string): Channel<T> {
    return Channel.instanceOf(this, key);
  }
}
