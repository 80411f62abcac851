// The argument wire of store.async (lib/wire.js): every JavaScript value reaches the core as the
// reference's JavaScript saw it. JSON-exact arguments go out as JSON.stringify writes them;
// everything else is tagged, strings with lone surrogates included.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const wire = require('../lib/wire.js') as {
  TAG: string;
  encode(value: unknown): unknown;
  encodeArguments(args: unknown[]): string;
};
const { SqliteControllerStore } = require('../index.js');

const T = wire.TAG;

describe('wire encoding', () => {
  it('sends JSON-exact arguments as JSON.stringify writes them', () => {
    const args = [{ runId: 'r-1', leaseMs: 1000, list: ['a', 1, true, null], nested: { x: 1.5 } }, 'x'];
    expect(wire.encodeArguments(args)).toBe(JSON.stringify(args));
  });

  it('tags what JSON would lose', () => {
    const sent = JSON.parse(
      // eslint-disable-next-line no-sparse-arrays -- the hole is what the wire must tag
      wire.encodeArguments([undefined, { a: undefined, b: NaN, c: -0, d: Infinity }, 10n, [1, , 2], Buffer.from('ab')]),
    );
    expect(sent[0]).toEqual({ [T]: 'undefined' });
    expect(Object.keys(sent[1])).toEqual(['a', 'b', 'c', 'd']);
    expect(sent[1]).toEqual({
      a: { [T]: 'undefined' },
      b: { [T]: 'number', v: 'NaN' },
      c: { [T]: 'number', v: '-0' },
      d: { [T]: 'number', v: 'Infinity' },
    });
    expect(sent[2]).toEqual({ [T]: 'bigint', v: '10' });
    expect(sent[3]).toEqual([1, { [T]: 'undefined' }, 2]);
    expect(sent[4]).toEqual({ [T]: 'bytes', kind: 'Buffer', v: '6162', text: 'ab' });
  });

  it('tags non-plain objects by kind, with their own properties', () => {
    class Input {
      runId = 'r-1';
    }
    const [date, input, symbol, fn] = JSON.parse(
      wire.encodeArguments([new Date(0), new Input(), Symbol('s'), function named() {}]),
    );
    expect(date).toEqual({ [T]: 'object', kind: 'Date', text: new Date(0).toString(), props: {} });
    expect(input).toEqual({ [T]: 'object', kind: 'Input', text: '[object Object]', props: { runId: 'r-1' } });
    expect(symbol).toEqual({ [T]: 'symbol', v: 's' });
    expect(fn).toEqual({ [T]: 'function', v: 'named' });
  });

  it('keeps user keys apart from tags and __proto__ an ordinary key', () => {
    const value = JSON.parse('{"__proto__": 1, "\\u0000": "undefined"}');
    const sent = JSON.parse(wire.encodeArguments([value]))[0];
    expect(Object.keys(sent)).toEqual(['__proto__', `${T}${T}`]);
  });

  it('writes lone surrogates readably and as the bytes SQLite receives', () => {
    expect(JSON.parse(wire.encodeArguments(['a\ud800']))[0]).toEqual({ [T]: 'string', v: 'a\ufffd', wtf8: '61eda080' });
  });

  it('stops at a fixed depth, so cyclic arguments cannot hang the encoder', () => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(() => wire.encodeArguments([cyclic])).not.toThrow();
  });
});

describe('wire through the store', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-wire-')));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('answers a lone-surrogate argument instead of failing to read it (sync and async)', async () => {
    const store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
    try {
      expect(store.getResourceByUid('u-\ud800')).toBeUndefined();
      await expect(store.async.getResourceByUid('u-\udc00')).resolves.toBeUndefined();
    } finally {
      store.close();
    }
  });

  it('raises what new Date throws where the reference reads the time', () => {
    const store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
    try {
      expect(() => store.putResource({ controller: 'jobs', key: 'a', spec: {}, initialStatus: {}, now: 10n })).toThrow(
        new TypeError('Cannot convert a BigInt value to a number'),
      );
    } finally {
      store.close();
    }
  });
});
