// The trace value encoding (README "Value encoding"): tagged single-key objects stand for values
// JSON cannot express. `decode` turns an encoded argument into the real JavaScript value the
// implementation receives; `describe` turns any actual value back into that notation for failure
// messages.

import { Bindings } from './placeholders';

export type Encoded = null | boolean | number | string | Encoded[] | { [key: string]: Encoded };

/** The UTF-8 text of a `blobs.content` BLOB in a dump (`{"$text": …}`). */
export class TextBlob {
  constructor(
    readonly text: string,
    readonly bytes: Buffer = Buffer.from(text, 'utf8'),
  ) {}
}

export const TAGS = ['$undefined', '$buffer', '$number', '$bigint', '$text', '$reenter'] as const;
export type Tag = (typeof TAGS)[number];

/** The tag of a tagged value, or undefined for ordinary values. Unknown `$` tags are an error. */
export function tagOf(value: Encoded): Tag | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const keys = Object.keys(value);
  if (keys.length !== 1 || !keys[0].startsWith('$')) return undefined;
  if (!(TAGS as readonly string[]).includes(keys[0])) {
    throw new Error(`Unknown value tag ${keys[0]} in trace`);
  }
  return keys[0] as Tag;
}

export function specialNumber(text: Encoded): number {
  switch (text) {
    case 'NaN':
      return NaN;
    case 'Infinity':
      return Infinity;
    case '-Infinity':
      return -Infinity;
    case '-0':
      return -0;
    default:
      throw new Error(`Unknown $number value ${JSON.stringify(text)}`);
  }
}

export function hexBuffer(hex: string): Buffer {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(hex)) throw new Error(`Invalid $buffer hex ${JSON.stringify(hex)}`);
  return Buffer.from(hex, 'hex');
}

/** Defines an own enumerable property the way JSON.parse does (even for `__proto__`). */
export function defineOwn(target: object, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * What `{"$reenter": …}` stands for (support/reentry.ts; only in traces that call the store
 * again from inside an argument): `getter` makes an accessor property, `value` any other value.
 */
export type DecodeHooks = {
  reenter(spec: Encoded): { getter: () => unknown } | { value: unknown };
};

/**
 * The JavaScript value an encoded `args`/`params`/`options` value stands for, with `$DIR` and
 * bound placeholders substituted in every string (keys included). Object keys are created in
 * file order.
 */
export function decode(value: Encoded, bindings: Bindings, hooks?: DecodeHooks): unknown {
  if (value === null || typeof value === 'boolean' || typeof value === 'number') return value;
  if (typeof value === 'string') return bindings.substitute(value);
  if (Array.isArray(value)) return value.map((item) => decode(item, bindings, hooks));
  const tag = tagOf(value);
  if (tag !== undefined) {
    const payload = value[tag];
    switch (tag) {
      case '$undefined':
        return undefined;
      case '$buffer':
        return hexBuffer(bindings.substitute(String(payload)));
      case '$number':
        return specialNumber(payload);
      case '$bigint':
        return BigInt(String(payload));
      case '$text':
        throw new Error('$text only appears in dumps');
      case '$reenter': {
        if (hooks === undefined) throw new Error('$reenter only appears in the re-entrancy traces');
        const made = hooks.reenter(payload);
        if ('getter' in made) throw new Error('$reenter via "getter" is only a property value');
        return made.value;
      }
    }
  }
  const out = {};
  for (const [key, item] of Object.entries(value)) {
    const made = hooks !== undefined && tagOf(item) === '$reenter' ? hooks.reenter((item as { $reenter: Encoded }).$reenter) : undefined;
    if (made !== undefined && 'getter' in made) {
      Object.defineProperty(out, bindings.substitute(key), { get: made.getter, enumerable: true, configurable: true });
    } else {
      defineOwn(out, bindings.substitute(key), made === undefined ? decode(item, bindings, hooks) : made.value);
    }
  }
  return out;
}

/** Any value in trace notation (tags for non-JSON values), for failure messages. */
export function describeValue(value: unknown, depth = 0): unknown {
  if (depth > 40) return '…';
  if (value === undefined) return { $undefined: true };
  if (typeof value === 'number') {
    if (Number.isNaN(value)) return { $number: 'NaN' };
    if (value === Infinity) return { $number: 'Infinity' };
    if (value === -Infinity) return { $number: '-Infinity' };
    if (Object.is(value, -0)) return { $number: '-0' };
    return value;
  }
  if (typeof value === 'bigint') return { $bigint: value.toString() };
  if (typeof value === 'function') return { $function: value.name };
  if (typeof value === 'symbol') return { $symbol: value.toString() };
  if (value === null || typeof value !== 'object') return value;
  if (Buffer.isBuffer(value)) return { $buffer: value.toString('hex') };
  if (value instanceof TextBlob) return { $text: value.text };
  if (value instanceof Uint8Array) return { $uint8array: Buffer.from(value).toString('hex') };
  if (isErrorLike(value)) {
    const error = value as Error;
    return { $error: `${constructorName(error)}: ${error.message}` };
  }
  if (Array.isArray(value)) {
    return Array.from(value, (item) => describeValue(item, depth + 1));
  }
  const out: Record<string, unknown> = {};
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    out.$class = constructorName(value);
  }
  for (const key of Object.keys(value)) {
    defineOwn(out, key, describeValue((value as Record<string, unknown>)[key], depth + 1));
  }
  return out;
}

/** Compact one-line rendering, cut to `limit` characters. */
export function show(value: unknown, limit = 400): string {
  let text: string;
  try {
    text = JSON.stringify(describeValue(value)) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > limit ? `${text.slice(0, limit)}… (${text.length} chars)` : text;
}

export function isErrorLike(value: unknown): boolean {
  return Object.prototype.toString.call(value) === '[object Error]' || value instanceof Error;
}

export function constructorName(value: unknown): string {
  if (value === null || value === undefined) return String(value);
  const ctor = (value as { constructor?: { name?: unknown } }).constructor;
  return typeof ctor?.name === 'string' ? ctor.name : typeof value;
}
