// lib/plain-arguments.js: which synchronous calls on a cluster may run from a snapshot of their
// arguments (docs/cluster.md, "store.async holds from the BEGIN"). Everything a read could
// observe, or answer differently the second time, must keep the call on the live path.

const { arePlainArguments } = require('../lib/plain-arguments.js');

const plain = (...args: unknown[]): boolean => arePlainArguments(args);

test('plain data: primitives, and arrays and plain objects of them, nested', () => {
  expect(plain()).toBe(true);
  expect(plain('run-1', 5, -0, NaN, Infinity, true, null, undefined, '\ud800')).toBe(true);
  expect(plain({ runId: 'run-1', leaseMs: 30_000, input: { list: [1, 'two', { three: [null] }] }, now: undefined })).toBe(true);
  expect(plain([], {}, [[[]]])).toBe(true);
  const shared = { n: 1 };
  expect(plain({ a: shared, b: shared })).toBe(true);
});

test('not plain: whatever a read could observe or see change', () => {
  const getter = Object.defineProperty({}, 'runId', { get: () => 'run-1', enumerable: true });
  const hidden = Object.defineProperty({}, 'runId', { value: 'run-1', enumerable: false, writable: true, configurable: true });
  const readOnly = Object.defineProperty({}, 'runId', { value: 'run-1', enumerable: true, writable: false, configurable: true });
  const cycle: Record<string, unknown> = {};
  cycle.self = cycle;
  let deep: unknown = 'leaf';
  for (let i = 0; i < 20; i++) deep = { deep };
  const holes = [1, , 3]; // eslint-disable-line no-sparse-arrays
  const extra = Object.assign([1, 2], { more: true });
  class Options {
    runId = 'run-1';
  }
  const cases: [string, unknown][] = [
    ['a getter', getter],
    ['a getter one level down', { claim: getter }],
    ['a non-enumerable property', hidden],
    ['a read-only property', readOnly],
    ['a symbol-keyed property', { [Symbol.toPrimitive]: () => 'x' }],
    ['a method', { toString: () => 'x' }],
    ['a Proxy', new Proxy({}, {})],
    ['a Proxy of an array', new Proxy([], {})],
    ['a Date', new Date(0)],
    ['a Buffer', Buffer.from('x')],
    ['a class instance', new Options()],
    ['a null-prototype object', Object.create(null)],
    ['a frozen object', Object.freeze({ runId: 'run-1' })],
    ['a sealed object', Object.seal({ runId: 'run-1' })],
    ['an array with a hole', holes],
    ['an array with a named property', extra],
    ['a bigint', 5n],
    ['a symbol', Symbol('x')],
    ['a function', () => 1],
    ['a cycle', cycle],
    ['a nesting deeper than 16', deep],
  ];
  for (const [title, value] of cases) expect([title, plain('run-1', value)]).toEqual([title, false]);
});

test('not plain while Object.prototype or Array.prototype is not as it was', () => {
  const options = { runId: 'run-1' };
  expect(plain(options)).toBe(true);
  const prototype = Object.prototype as Record<string, unknown>;
  prototype.now = 5;
  try {
    expect(plain(options)).toBe(false);
  } finally {
    delete prototype.now;
  }
  expect(plain(options)).toBe(true);
  const map = Array.prototype.map;
  Array.prototype.map = function replaced(this: unknown[], ...args: Parameters<typeof map>) {
    return map.apply(this, args);
  } as typeof map;
  try {
    expect(plain(options)).toBe(false);
  } finally {
    Array.prototype.map = map;
  }
  expect(plain(options)).toBe(true);
});
