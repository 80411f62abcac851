// Deep equality between an encoded expectation (straight from the trace file) and an actual
// JavaScript value, as the README's "Comparing results" asks: own enumerable property names in
// the same order, arrays in order, absent ≠ undefined ≠ null, numbers with Object.is (so -0 and
// NaN are exact), Buffers byte for byte, tagged values, and placeholders bound on first sight.

import { Bindings } from './placeholders';
import { constructorName, Encoded, hexBuffer, show, specialNumber, tagOf, TextBlob } from './values';

export class Mismatch extends Error {
  /** The whole actual value being compared (set by callers that can show more context). */
  context?: unknown;

  constructor(
    readonly at: string,
    readonly reason: string,
    readonly expected: unknown,
    readonly actual: unknown,
  ) {
    super(`${at || '(value)'}: ${reason}`);
    this.name = 'Mismatch';
  }

  /** path + expected + actual, one line each. */
  render(indent = '  '): string {
    return [
      `${indent}at:       ${this.at || '(top)'}`,
      `${indent}problem:  ${this.reason}`,
      `${indent}expected: ${this.expectedText()}`,
      `${indent}actual:   ${show(this.actual)}`,
    ].join('\n');
  }

  private expectedText(): string {
    const text = JSON.stringify(this.expected) ?? 'undefined';
    return text.length > 400 ? `${text.slice(0, 400)}… (${text.length} chars)` : text;
  }
}

function childPath(at: string, key: string | number): string {
  if (typeof key === 'number') return `${at}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? (at ? `${at}.${key}` : key) : `${at}[${JSON.stringify(key)}]`;
}

function isPlainRecord(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (Buffer.isBuffer(value)) return 'Buffer';
  if (typeof value === 'object') return isPlainRecord(value) ? 'object' : constructorName(value);
  return typeof value;
}

/**
 * Throws a `Mismatch` at the first difference (in walk order), binding placeholders as it goes.
 * `at` is the path used in the message.
 */
export function expectMatch(expected: Encoded, actual: unknown, bindings: Bindings, at = ''): void {
  const fail = (reason: string): never => {
    throw new Mismatch(at, reason, expected, actual);
  };
  if (expected === null) {
    if (actual !== null) fail(`expected null, got ${kindOf(actual)}`);
    return;
  }
  if (typeof expected === 'boolean') {
    if (actual !== expected) fail(typeof actual === 'boolean' ? 'values differ' : `expected boolean, got ${kindOf(actual)}`);
    return;
  }
  if (typeof expected === 'number') {
    if (typeof actual !== 'number') fail(`expected number, got ${kindOf(actual)}`);
    if (!Object.is(actual, expected)) fail('values differ');
    return;
  }
  if (typeof expected === 'string') {
    if (typeof actual !== 'string') fail(`expected string, got ${kindOf(actual)}`);
    const problem = bindings.match(expected, actual as string);
    if (problem !== null) fail(problem);
    return;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return fail(`expected array, got ${kindOf(actual)}`);
    const common = Math.min(expected.length, actual.length);
    for (let index = 0; index < common; index += 1) {
      if (!(index in actual)) fail(`array hole at ${index}`);
      expectMatch(expected[index], actual[index], bindings, childPath(at, index));
    }
    if (expected.length !== actual.length) {
      fail(`array length ${actual.length}, expected ${expected.length}`);
    }
    return;
  }
  const tag = tagOf(expected);
  if (tag !== undefined) {
    expectTagged(tag, expected[tag], actual, bindings, fail);
    return;
  }
  if (!isPlainRecord(actual)) return fail(`expected plain object, got ${kindOf(actual)}`);
  const expectedKeys = Object.keys(expected).map((key) => bindings.dirText(key));
  const actualKeys = Object.keys(actual);
  if (expectedKeys.join('\u0000') !== actualKeys.join('\u0000')) {
    const missing = expectedKeys.filter((key) => !actualKeys.includes(key));
    const extra = actualKeys.filter((key) => !expectedKeys.includes(key));
    const parts: string[] = [];
    if (missing.length > 0) parts.push(`missing ${JSON.stringify(missing)}`);
    if (extra.length > 0) parts.push(`unexpected ${JSON.stringify(extra)}`);
    if (parts.length === 0) {
      parts.push(`key order ${JSON.stringify(actualKeys)}, expected ${JSON.stringify(expectedKeys)}`);
    }
    fail(`properties differ: ${parts.join('; ')}`);
  }
  for (const [index, key] of Object.keys(expected).entries()) {
    expectMatch(expected[key], actual[expectedKeys[index]], bindings, childPath(at, expectedKeys[index]));
  }
}

function expectTagged(
  tag: string,
  payload: Encoded,
  actual: unknown,
  bindings: Bindings,
  fail: (reason: string) => never,
): void {
  switch (tag) {
    case '$undefined':
      if (actual !== undefined) fail(`expected undefined, got ${kindOf(actual)}`);
      return;
    case '$buffer': {
      if (!Buffer.isBuffer(actual)) return fail(`expected Buffer, got ${kindOf(actual)}`);
      const text = bindings.dirText(String(payload));
      if (text.includes('$')) {
        const problem = bindings.match(text, actual.toString('hex'));
        if (problem !== null) fail(problem);
      } else if (!hexBuffer(text).equals(actual)) {
        fail('bytes differ');
      }
      return;
    }
    case '$number':
      if (typeof actual !== 'number') fail(`expected number, got ${kindOf(actual)}`);
      if (!Object.is(actual, specialNumber(payload))) fail('values differ');
      return;
    case '$bigint':
      if (typeof actual !== 'bigint') fail(`expected bigint, got ${kindOf(actual)}`);
      if (actual !== BigInt(String(payload))) fail('values differ');
      return;
    case '$text': {
      if (!(actual instanceof TextBlob)) return fail(`expected BLOB text, got ${kindOf(actual)}`);
      const problem = bindings.match(String(payload), actual.text);
      if (problem !== null) fail(problem);
      return;
    }
  }
}
