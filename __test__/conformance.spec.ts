// The conformance replayer: one test per recorded trace (README: __test__/conformance/README.md),
// plus unit tests of the replayer's own pieces so a red or green trace can be trusted.
//
// A trace is skipped while the store class lacks a method it calls. On a difference the test fails
// with the step index, the method and path/expected/actual of the first difference. Environment:
// PIW_CONFORMANCE_DIR (the traces directory; default __test__/conformance/traces, the
// repository's copy), PIW_CONFORMANCE_KEEP=1 (keep a failing trace's temporary directory) and
// PIW_CONFORMANCE_ALL=1 (a diagnostic: go on past differences and list every differing step).
// Traces in support/known-failing.ts run as `it.failing` and are reported as known failing.

import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import Database from 'better-sqlite3';

import { assertUtc, jestClock } from './support/clock';
import { expectMatch, Mismatch } from './support/compare';
import { conformancePaths } from './support/paths';
import { Bindings } from './support/placeholders';
import {
  expectError,
  Face,
  missingMethods,
  replayTrace,
  replayTraceAsync,
  StoreClass,
  Trace,
  TraceFailure,
} from './support/replayer';
import { checkBlobHashes, dumpDatabase, runSql } from './support/sqlite';
import { KNOWN_FAILING, KNOWN_FAILING_SUFFIX } from './support/known-failing';
import { FIXTURE_TRACE, traceEntries } from './support/traces';
import { decode, Encoded, TextBlob } from './support/values';

// Date-time strings without an offset are local time in the reference: the traces were recorded
// with TZ=UTC, and a different zone must fail loudly rather than produce confusing diffs.
assertUtc();

const { SqliteControllerStore } = require('../index.js') as { SqliteControllerStore: StoreClass };

const paths = conformancePaths();
const keepDir = process.env.PIW_CONFORMANCE_KEEP === '1';
const allSteps = process.env.PIW_CONFORMANCE_ALL === '1';

// Every trace through both faces of the store: the synchronous methods, and `store.async`
// (whose arguments are read before the call is queued, by lib/wire.js, and whose result, error
// and in-place claim changes arrive when its Promise settles).
const FACES: { face: Face; title: string }[] = [
  { face: 'sync', title: 'conformance' },
  { face: 'async', title: 'conformance through store.async' },
];

for (const { face, title } of FACES) {
  describe(title, () => {
    for (const entry of traceEntries(paths)) {
      if ('error' in entry) {
        const label = path.basename(entry.file);
        it(label, () => {
          throw entry.error;
        });
        continue;
      }
      const { trace } = entry;
      const missing = missingMethods(trace, SqliteControllerStore);
      if (missing.length > 0) {
        // Counted as skipped (never passed) until every method the trace calls exists.
        it.skip(trace.name, () => undefined);
        continue;
      }
      const options = {
        Store: SqliteControllerStore,
        clock: jestClock,
        conformanceRoot: paths.root,
        keepDir,
        allSteps,
      };
      const replay = face === 'sync' ? () => replayTrace(trace, options) : () => replayTraceAsync(trace, options);
      if (KNOWN_FAILING.has(trace.name) && !allSteps) it.failing(`${trace.name}${KNOWN_FAILING_SUFFIX}`, replay);
      else it(trace.name, replay);
    }
  });
}

// ---------------------------------------------------------------------------------------------

describe('replayer internals', () => {
  const UUID_A = '0f8fad5b-d9cb-469f-a165-70867728950e';
  const UUID_B = '7c9e6679-7425-40de-944b-e07fc1f90ae7';
  const TOKEN = 'A'.repeat(20) + '-_' + 'b'.repeat(21); // 43 base64url characters
  const ENV = 'a'.repeat(40);
  const HASH = 'c'.repeat(64);

  const mismatchOf = (run: () => void): Mismatch => {
    try {
      run();
    } catch (error) {
      if (error instanceof Mismatch) return error;
      throw error;
    }
    throw new Error('expected a mismatch');
  };

  describe('trace discovery', () => {
    it('finds the trace directory and every trace plus the fixture trace', () => {
      const entries = traceEntries(paths);
      const errors = entries.filter((entry) => 'error' in entry);
      expect(errors).toEqual([]);
      expect(entries.length).toBeGreaterThan(1);
      const fixture = entries.findIndex((entry) => entry.file.endsWith(FIXTURE_TRACE));
      expect(fixture).toBeGreaterThan(0);
      const hostile = entries.slice(fixture + 1);
      expect(hostile.length).toBeGreaterThan(0);
      expect(hostile.every((entry) => path.dirname(entry.file) === paths.hostile)).toBe(true);
    });

    it('reports a missing directory as a failing entry, never as nothing to do', () => {
      const entries = traceEntries({
        root: '/nonexistent',
        traces: '/nonexistent/traces',
        fixtures: '/nonexistent/fixtures',
        hostile: '/nonexistent/hostile',
      });
      expect(entries).toHaveLength(1);
      expect('error' in entries[0] && entries[0].error.message).toMatch(/not found/);
    });

    it('accepts PIW_CONFORMANCE_DIR naming the traces or the conformance directory', () => {
      const viaTraces = conformancePaths({ PIW_CONFORMANCE_DIR: paths.traces });
      const viaRoot = conformancePaths({ PIW_CONFORMANCE_DIR: paths.root });
      expect(viaTraces).toEqual(paths);
      expect(viaRoot).toEqual(paths);
    });

    it('reports a missing hostile directory as a failing entry', () => {
      const entries = traceEntries({ ...paths, hostile: path.join(paths.root, 'no-such-hostile') });
      expect(entries.filter((entry) => 'error' in entry).map((entry) => (entry as { error: Error }).error.message)).toEqual([
        expect.stringMatching(/hostile traces directory not found/),
      ]);
    });

    it('lists only traces that exist as known failing', () => {
      const names = new Set(traceEntries(paths).flatMap((entry) => ('trace' in entry ? [entry.trace.name] : [])));
      expect([...KNOWN_FAILING].filter((name) => !names.has(name))).toEqual([]);
    });

    it('skips a trace only for methods the class lacks (constructor and close never count)', () => {
      class Store {
        close(): void {}
        getResource(): void {}
      }
      const trace = { methods: ['close', 'constructor', 'getResource'] } as Trace;
      expect(missingMethods(trace, Store as unknown as StoreClass)).toEqual([]);
      const more = { methods: ['close', 'constructor', 'getResource', 'putResource'] } as Trace;
      expect(missingMethods(more, Store as unknown as StoreClass)).toEqual(['putResource']);
    });
  });

  describe('decode', () => {
    it('turns tags into JavaScript values and keeps key order', () => {
      const bindings = new Bindings('/tmp/x');
      const value = decode(
        {
          z: { $undefined: true },
          a: [{ $undefined: true }, { $number: '-0' }, { $number: 'NaN' }, { $number: '-Infinity' }],
          b: { $buffer: '00ff' },
          c: { $bigint: '10' },
          path: '$DIR/a/../b',
        } as Encoded,
        bindings,
      ) as Record<string, unknown>;
      expect(Object.keys(value)).toEqual(['z', 'a', 'b', 'c', 'path']);
      expect('z' in value && value.z === undefined).toBe(true);
      const list = value.a as unknown[];
      expect(list).toHaveLength(4);
      expect(0 in list && list[0] === undefined).toBe(true);
      expect(Object.is(list[1], -0)).toBe(true);
      expect(Number.isNaN(list[2])).toBe(true);
      expect(list[3]).toBe(-Infinity);
      expect(Buffer.isBuffer(value.b) && (value.b as Buffer).equals(Buffer.from([0, 255]))).toBe(true);
      expect(value.c).toBe(10n);
      expect(value.path).toBe('/tmp/x/a/../b');
    });

    it('creates __proto__ as an own property, like JSON.parse', () => {
      const value = decode(JSON.parse('{"__proto__": {"x": 1}}'), new Bindings()) as object;
      expect(Object.keys(value)).toEqual(['__proto__']);
      expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    });

    it('substitutes bound placeholders and refuses unbound ones', () => {
      const bindings = new Bindings();
      expect(bindings.match('uid-$rand:1', `uid-${UUID_A}`)).toBeNull();
      expect(decode({ token: 'uid-$rand:1' }, bindings)).toEqual({ token: `uid-${UUID_A}` });
      expect(() => decode(['$rand:2'], bindings)).toThrow('$rand:2 is used before a result bound it');
      expect(() => decode({ $weird: 1 } as Encoded, bindings)).toThrow('Unknown value tag');
    });
  });

  describe('placeholders', () => {
    it('binds on first occurrence and requires the same value afterwards', () => {
      const bindings = new Bindings();
      expect(bindings.match('$rand:1', UUID_A)).toBeNull();
      expect(bindings.match('$rand:1', UUID_A)).toBeNull();
      expect(bindings.match('$rand:1', UUID_B)).not.toBeNull();
      expect(bindings.get('rand', '1')).toBe(UUID_A);
    });

    it('requires distinct numbers to be distinct values', () => {
      const bindings = new Bindings();
      expect(bindings.match('$rand:1', UUID_A)).toBeNull();
      expect(bindings.match('$rand:2', UUID_A)).toMatch(/already \$rand:1/);
      expect(bindings.get('rand', '2')).toBeUndefined();
      expect(bindings.match('$rand:3-$rand:4', `${UUID_B}-${UUID_B}`)).toMatch(/same value/);
      expect(bindings.match('$rand:3/$rand:3', `${UUID_B}/${UUID_B}`)).toBeNull();
    });

    it('accepts only the documented shapes', () => {
      const bindings = new Bindings();
      expect(bindings.match('$rand:1', TOKEN)).toBeNull();
      expect(bindings.match('$rand:2', UUID_A.toUpperCase())).not.toBeNull();
      expect(bindings.match('$rand:2', TOKEN.slice(1))).not.toBeNull();
      expect(bindings.match('project-$env:1', `project-${ENV}`)).toBeNull();
      expect(bindings.match('$env:2', 'a'.repeat(41))).not.toBeNull();
      expect(bindings.match('$hash:1', HASH)).toBeNull();
      expect(bindings.match('$hash:2', HASH.toUpperCase())).not.toBeNull();
    });

    it('binds several placeholders inside one string and in embedded JSON text', () => {
      const bindings = new Bindings('/tmp/dir (1)+');
      const text = `{"path":"/tmp/dir (1)+/p","requestId":"${UUID_A}","project":"${ENV}"}`;
      expect(bindings.match('{"path":"$DIR/p","requestId":"$rand:4","project":"$env:1"}', text)).toBeNull();
      expect(bindings.snapshot()).toEqual({ '$rand:4': UUID_A, '$env:1': ENV });
    });

    it('binds nothing when a string does not match', () => {
      const bindings = new Bindings();
      expect(bindings.match('$rand:1 and $rand:2', `${UUID_A} or ${UUID_B}`)).not.toBeNull();
      expect(bindings.snapshot()).toEqual({});
    });
  });

  describe('deep equality', () => {
    const equal = (expected: Encoded, actual: unknown) => expectMatch(expected, actual, new Bindings(), 'v');

    it('checks own property order, absence and undefined', () => {
      expect(() => equal({ a: 1, b: 2 }, { a: 1, b: 2 })).not.toThrow();
      expect(mismatchOf(() => equal({ a: 1, b: 2 }, { b: 2, a: 1 })).reason).toMatch(/key order/);
      expect(mismatchOf(() => equal({ a: 1 }, { a: 1, b: undefined })).reason).toMatch(/unexpected \["b"\]/);
      expect(mismatchOf(() => equal({ a: 1, b: { $undefined: true } }, { a: 1 })).reason).toMatch(/missing \["b"\]/);
      expect(() => equal({ a: { $undefined: true } }, { a: undefined })).not.toThrow();
      expect(mismatchOf(() => equal({ a: null }, { a: undefined })).at).toBe('v.a');
      expect(mismatchOf(() => equal({ a: { $undefined: true } }, { a: null })).at).toBe('v.a');
      expect(mismatchOf(() => equal({ $undefined: true }, null)).reason).toMatch(/undefined/);
    });

    it('compares numbers exactly, including -0 and NaN', () => {
      expect(mismatchOf(() => equal(0, -0)).reason).toBe('values differ');
      expect(() => equal({ $number: '-0' }, -0)).not.toThrow();
      expect(() => equal({ $number: 'NaN' }, NaN)).not.toThrow();
      expect(mismatchOf(() => equal(1, '1')).reason).toMatch(/expected number/);
      expect(() => equal({ $bigint: '10' }, 10n)).not.toThrow();
      expect(mismatchOf(() => equal({ $bigint: '10' }, 10)).reason).toMatch(/bigint/);
    });

    it('compares arrays in order and reports the first differing path', () => {
      const mismatch = mismatchOf(() => equal([{ a: [1, 2] }], [{ a: [1, 3] }]));
      expect(mismatch.at).toBe('v[0].a[1]');
      expect(mismatch.render()).toContain('expected: 2');
      expect(mismatch.render()).toContain('actual:   3');
      expect(mismatchOf(() => equal([1, 2], [1, 2, 3])).reason).toMatch(/length 3, expected 2/);
      expect(mismatchOf(() => equal([], {})).reason).toMatch(/expected array/);
      expect(mismatchOf(() => equal({}, [])).reason).toMatch(/plain object/);
    });

    it('compares Buffers byte for byte and tells BLOB text from strings', () => {
      expect(() => equal({ $buffer: '0aff' }, Buffer.from([10, 255]))).not.toThrow();
      expect(mismatchOf(() => equal({ $buffer: '0aff' }, Buffer.from([10, 254]))).reason).toBe('bytes differ');
      expect(mismatchOf(() => equal({ $buffer: '0aff' }, new Uint8Array([10, 255]))).reason).toMatch(/Buffer/);
      expect(mismatchOf(() => equal({ $buffer: '' }, '')).reason).toMatch(/Buffer/);
      expect(() => equal({ $text: '{"a":1}' }, new TextBlob('{"a":1}'))).not.toThrow();
      expect(mismatchOf(() => equal({ $text: 'x' }, 'x')).reason).toMatch(/BLOB text/);
      expect(mismatchOf(() => equal('x', new TextBlob('x'))).reason).toMatch(/expected string/);
    });

    it('refuses class instances where plain records are expected', () => {
      class Record {
        a = 1;
      }
      expect(mismatchOf(() => equal({ a: 1 }, new Record())).reason).toMatch(/plain object, got Record/);
      expect(() => equal({ a: 1 }, Object.assign(Object.create(null), { a: 1 }))).not.toThrow();
    });

    it('binds placeholders in walk order, including $hash inside $buffer', () => {
      const bindings = new Bindings();
      expectMatch(
        { blob_hash: { $buffer: '$hash:1' }, ref: { $buffer: '$hash:1' }, uid: '$rand:1' },
        { blob_hash: Buffer.from(HASH, 'hex'), ref: Buffer.from(HASH, 'hex'), uid: UUID_A },
        bindings,
      );
      expect(bindings.snapshot()).toEqual({ '$hash:1': HASH, '$rand:1': UUID_A });
      const other = Buffer.from('d'.repeat(64), 'hex');
      expect(mismatchOf(() => expectMatch({ $buffer: '$hash:1' }, other, bindings)).reason).toBe('values differ');
    });
  });

  describe('errors', () => {
    class SqliteError extends Error {
      code: string;
      constructor(message: string, code: string) {
        super(message);
        this.code = code;
      }
    }
    Object.defineProperty(SqliteError.prototype, 'name', { value: 'SqliteError', enumerable: false });
    class ResourceNotFoundError extends Error {
      constructor(message: string) {
        super(message);
        this.name = 'ResourceNotFoundError';
      }
    }

    it('compares constructor name, message and own enumerable props', () => {
      const bindings = new Bindings();
      expectError(
        { name: 'SqliteError', message: 'file is not a database', props: { code: 'SQLITE_NOTADB' } },
        new SqliteError('file is not a database', 'SQLITE_NOTADB'),
        bindings,
      );
      expectError(
        { name: 'ResourceNotFoundError', message: 'Controller resource not found: $rand:3', props: { name: 'ResourceNotFoundError' } },
        new ResourceNotFoundError(`Controller resource not found: ${UUID_A}`),
        bindings,
      );
      expect(bindings.get('rand', '3')).toBe(UUID_A);
      expectError({ name: 'TypeError', message: 'x' }, new TypeError('x'), bindings);
    });

    it('reports the wrong class, message or props', () => {
      const bindings = new Bindings();
      expect(mismatchOf(() => expectError({ name: 'TypeError', message: 'x' }, new Error('x'), bindings)).at).toBe(
        'throws.name',
      );
      expect(mismatchOf(() => expectError({ name: 'Error', message: 'x' }, new Error('y'), bindings)).at).toBe(
        'throws.message',
      );
      const withCode = Object.assign(new Error('x'), { code: 'E' });
      expect(mismatchOf(() => expectError({ name: 'Error', message: 'x' }, withCode, bindings)).at).toBe('throws.props');
      expect(mismatchOf(() => expectError({ name: 'Error', message: 'x' }, 'x', bindings)).at).toBe('throws');
    });
  });

  describe('sqlite helpers', () => {
    let dir: string;
    beforeEach(() => {
      dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-replayer-')));
    });
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

    it('runs engine SQL with foreign keys on and reports changes', () => {
      const file = path.join(dir, 'a.sqlite');
      expect(runSql(file, 'CREATE TABLE p(id INTEGER PRIMARY KEY)', [])).toBe(0);
      expect(runSql(file, 'CREATE TABLE c(id INTEGER PRIMARY KEY, p INTEGER REFERENCES p(id))', [])).toBe(0);
      expect(runSql(file, 'INSERT INTO p(id) VALUES (?), (?)', [1, 2])).toBe(2);
      expect(() => runSql(file, 'INSERT INTO c(id, p) VALUES (1, 99)', [])).toThrow('FOREIGN KEY constraint failed');
      expect(runSql(file, 'PRAGMA user_version = 2', [])).toBe(0);
    });

    it('dumps tables in sqlite_schema order with typed cells', () => {
      const file = path.join(dir, 'd.sqlite');
      const db = new Database(file);
      db.exec(`
        CREATE TABLE blobs(blob_hash BLOB PRIMARY KEY, content BLOB NOT NULL, n INTEGER) STRICT;
        CREATE TABLE events(seq INTEGER PRIMARY KEY AUTOINCREMENT, z TEXT, a REAL);
        CREATE TABLE kv(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
      `);
      const content = Buffer.from('{"a":1}');
      const hash = require('node:crypto').createHash('sha256').update(content).digest();
      db.prepare('INSERT INTO blobs VALUES (?, ?, ?)').run(hash, content, 9007199254740993n);
      db.prepare('INSERT INTO events(z, a) VALUES (?, ?), (?, ?)').run('second', 1.5, 'first', null);
      db.prepare('INSERT INTO kv VALUES (?, ?), (?, ?)').run('b', Buffer.from([1]), 'a', Buffer.from([2]));
      db.close();
      const dump = dumpDatabase(file);
      expect(Object.keys(dump)).toEqual(['blobs', 'events', 'sqlite_sequence', 'kv']);
      expect(dump.blobs[0].content).toBeInstanceOf(TextBlob);
      expect((dump.blobs[0].content as TextBlob).text).toBe('{"a":1}');
      expect(dump.blobs[0].n).toBe(9007199254740993n);
      expect(Object.keys(dump.events[0])).toEqual(['seq', 'z', 'a']);
      expect(dump.events).toEqual([
        { seq: 1, z: 'second', a: 1.5 },
        { seq: 2, z: 'first', a: null },
      ]);
      expect(dump.sqlite_sequence).toEqual([{ name: 'events', seq: 2 }]);
      expect(dump.kv.map((row) => row.k)).toEqual(['a', 'b']);
      expect(() => checkBlobHashes(dump)).not.toThrow();
      dump.blobs[0].content = new TextBlob('{"a":2}');
      expect(() => checkBlobHashes(dump)).toThrow('blob_hash is not the SHA-256 of content');
    });

    it('reads the fixture database like the recorded dump (tables the read-write open leaves alone)', () => {
      const copy = path.join(dir, 'state.sqlite');
      fs.writeFileSync(copy, fs.readFileSync(path.join(paths.fixtures, 'state-0.16.1.sqlite')));
      const raw = dumpDatabase(copy);
      const fixture = JSON.parse(fs.readFileSync(path.join(paths.fixtures, FIXTURE_TRACE), 'utf8')) as Trace;
      const dumps = fixture.steps.filter((step) => step.do === 'dump');
      const expected = (dumps[dumps.length - 1] as { tables: Record<string, Encoded> }).tables;
      expect(Object.keys(raw)).toEqual(Object.keys(expected));
      const bindings = new Bindings(dir);
      for (const table of Object.keys(expected)) {
        // The recorded dump follows a read-write open, which prunes unreferenced blobs.
        if (table === 'blobs') continue;
        expectMatch(expected[table], raw[table], bindings, `tables.${table}`);
      }
      const kept = new Set((expected.blobs as { blob_hash: { $buffer: string } }[]).map((row) => row.blob_hash.$buffer));
      const rawKept = raw.blobs.filter((row) => kept.has((row.blob_hash as Buffer).toString('hex')));
      expectMatch(expected.blobs, rawKept, bindings, 'tables.blobs');
      expect(raw.blobs.length).toBeGreaterThan(rawKept.length);
      checkBlobHashes(raw);
    });
  });

  describe('recorded traces', () => {
    // Every expectation in every trace, with its placeholders filled in by consistent made-up
    // values, must satisfy the matcher, and every placeholder an argument uses must have been bound
    // earlier in walk order. This runs the whole trace set through decode/match/bind without the
    // implementation under test.
    const madeUp = (kind: string): string => {
      const bytes = randomBytes(32);
      if (kind === 'env') return bytes.toString('hex').slice(0, 40);
      if (kind === 'hash') return bytes.toString('hex');
      return bytes[0] % 2 === 0 ? randomUUID() : bytes.toString('base64url');
    };
    const fill = (text: string, dir: string, values: Map<string, string>) =>
      text.split('$DIR').join(dir).replace(/\$(rand|env|hash):(\d+)/g, (label, kind: string) => {
        if (!values.has(label)) values.set(label, madeUp(kind));
        return values.get(label) as string;
      });
    const materialise = (value: Encoded, dir: string, values: Map<string, string>): unknown => {
      if (typeof value === 'string') return fill(value, dir, values);
      if (value === null || typeof value !== 'object') return value;
      if (Array.isArray(value)) return value.map((item) => materialise(item, dir, values));
      const tag = Object.keys(value).length === 1 ? Object.keys(value)[0] : '';
      if (tag === '$text') return new TextBlob(fill(value.$text as string, dir, values));
      if (tag === '$buffer') return Buffer.from(fill(value.$buffer as string, dir, values), 'hex');
      if (tag.startsWith('$')) return decode(value, new Bindings(dir));
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) {
        Object.defineProperty(out, key, { value: materialise(item, dir, values), enumerable: true });
      }
      return out;
    };

    for (const entry of traceEntries(paths)) {
      if ('error' in entry) continue;
      it(`${entry.trace.name} is self-consistent`, () => {
        const dir = '/tmp/piw (dir)+[x]';
        const bindings = new Bindings(dir);
        const values = new Map<string, string>();
        const check = (expected: Encoded | undefined, at: string) => {
          if (expected !== undefined) expectMatch(expected, materialise(expected, dir, values), bindings, at);
        };
        entry.trace.steps.forEach((step, index) => {
          try {
            switch (step.do) {
              case 'call':
                decode(step.args, bindings);
                check(step.returns, 'returns');
                check(step.throws as unknown as Encoded, 'throws');
                check(step.argsAfter, 'argsAfter');
                break;
              case 'open':
                decode(step.options, bindings);
                check(step.throws as unknown as Encoded, 'throws');
                break;
              case 'sql':
                decode(step.params, bindings);
                break;
              case 'dump':
                check(step.tables, 'tables');
                break;
            }
          } catch (error) {
            throw new Error(`step ${index} ${step.do}: ${(error as Error).message}`);
          }
        });
        // Bound values are exactly the made-up ones.
        expect(bindings.snapshot()).toEqual(Object.fromEntries(values));
      });
    }
  });

  describe('replayTrace and replayTraceAsync', () => {
    // A stand-in store in plain JavaScript: enough behaviour to drive every step kind.
    class FakeStore {
      static opened: string[] = [];
      readonly file: string;
      closed = false;
      constructor(file: string, options: { projectPath?: string; fail?: boolean }) {
        if (options.fail) throw Object.assign(new Error(`cannot open ${file}`), { code: 'E_OPEN' });
        this.file = file;
        FakeStore.opened.push(file);
      }
      close(): void {
        this.closed = true;
      }
      stamp(): unknown {
        if (this.closed) throw new TypeError('The database connection is not open');
        return { now: Date.now(), iso: new Date().toISOString(), id: randomUUID() };
      }
      bump(claim: { resourceVersion: number }): undefined {
        claim.resourceVersion += 1;
        return undefined;
      }
      echo(value: unknown): unknown {
        return value;
      }
      sneaky(value: { a: number }): number {
        value.a = 2;
        return 1;
      }
      readA(value: { a: unknown }): unknown {
        return value.a;
      }
      text(value: unknown): string {
        return `${value}`;
      }
      /** `store.async`: each method as a Promise settled on a later turn of the event loop. */
      get async(): Record<string, (...args: unknown[]) => Promise<unknown>> {
        const methods = FakeStore.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
        const names = ['stamp', 'bump', 'echo', 'sneaky', 'readA', 'text', 'write'];
        return Object.fromEntries(
          names.map((name) => [
            name,
            (...args: unknown[]) =>
              new Promise((resolve, reject) =>
                setImmediate(() => {
                  try {
                    resolve(methods[name].apply(this, args));
                  } catch (error) {
                    reject(error);
                  }
                }),
              ),
          ]),
        );
      }
      write(): void {
        const db = new Database(this.file);
        db.exec('CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB, uid TEXT, at INTEGER)');
        db.prepare('INSERT INTO t(body, uid, at) VALUES (?, ?, ?)').run(Buffer.from(String(Date.now())), randomUUID(), Date.now());
        db.close();
      }
    }
    const Store = FakeStore as unknown as StoreClass;
    const replay = (steps: unknown[], clockStart = 1789257600005) =>
      replayTrace(
        { format: 'piw-conformance-trace/1', name: 't', clockStart, methods: [], steps } as unknown as Trace,
        { Store, clock: jestClock, conformanceRoot: paths.root },
      );
    const failureOf = (steps: unknown[]): string => {
      try {
        replay(steps);
      } catch (error) {
        if (error instanceof TraceFailure) return error.message;
        throw error;
      }
      throw new Error('expected the trace to fail');
    };
    const hex = (text: string) => Buffer.from(text).toString('hex');

    const open = { do: 'open', store: 's', file: '$DIR/s.sqlite', options: { projectPath: '$DIR/p' }, mkdirs: ['$DIR/p'] };
    const stamp = {
      do: 'call',
      store: 's',
      method: 'stamp',
      args: [],
      returns: { now: 1789257600005, iso: '2026-09-13T00:00:00.005Z', id: '$rand:1' },
    };
    const stampLater = {
      do: 'call',
      store: 's',
      method: 'stamp',
      args: [],
      returns: { now: 1789257601005, iso: '2026-09-13T00:00:01.005Z', id: '$rand:2' },
    };
    const bump = {
      do: 'call',
      store: 's',
      method: 'bump',
      args: [{ token: '$rand:2', resourceVersion: 3 }],
      returns: { $undefined: true },
      argsAfter: [{ token: '$rand:2', resourceVersion: 4 }],
    };
    const write = { do: 'call', store: 's', method: 'write', args: [], returns: { $undefined: true } };
    const sql = { do: 'sql', store: 's', file: '$DIR/s.sqlite', sql: 'UPDATE t SET at = ? WHERE id = 1', params: [7], changes: 1 };
    const closed = {
      do: 'call',
      store: 's',
      method: 'stamp',
      args: [],
      throws: { name: 'TypeError', message: 'The database connection is not open' },
    };
    const happy = [
      open,
      stamp,
      { do: 'tick', ms: 1000 },
      stampLater,
      { do: 'call', store: 's', method: 'echo', args: ['$rand:1'], returns: '$rand:1' },
      bump,
      write,
      sql,
      { do: 'writeFile', file: '$DIR/note.txt', text: 'in $DIR' },
      { do: 'symlink', path: '$DIR/link', target: '$DIR/p' },
      {
        do: 'open',
        store: 'bad',
        file: '$DIR/x',
        options: { fail: true },
        throws: { name: 'Error', message: 'cannot open $DIR/x', props: { code: 'E_OPEN' } },
      },
      { do: 'tick', ms: 0 },
      write,
      { do: 'close', store: 's' },
      { do: 'close', store: 's' },
      closed,
      {
        do: 'dump',
        file: '$DIR/s.sqlite',
        tables: {
          t: [
            { id: 1, body: { $buffer: hex('1789257601005') }, uid: '$rand:3', at: 7 },
            { id: 2, body: { $buffer: hex('1789257601005') }, uid: '$rand:4', at: 1789257601005 },
          ],
          sqlite_sequence: [{ name: 't', seq: 2 }],
        },
      },
    ];

    it('drives every step kind with a frozen clock and placeholders', () => {
      FakeStore.opened = [];
      replay(happy);
      expect(FakeStore.opened).toHaveLength(1);
      // $DIR is the canonical path of a fresh directory, removed afterwards
      expect(FakeStore.opened[0].startsWith(fs.realpathSync(os.tmpdir()) + path.sep)).toBe(true);
      expect(fs.existsSync(path.dirname(FakeStore.opened[0]))).toBe(false);
      // real time again
      expect(Math.abs(Date.now() - (performance.timeOrigin + performance.now()))).toBeLessThan(5000);
    });

    it('compares dumps row by row and shows both rows', () => {
      const dump = happy[happy.length - 1] as { tables: { t: Record<string, unknown>[] } };
      const wrongBody = { ...dump, tables: { ...dump.tables, t: [{ ...dump.tables.t[0], body: { $buffer: '00' } }, dump.tables.t[1]] } };
      const message = failureOf([...happy.slice(0, -1), wrongBody]);
      expect(message).toContain(`step ${happy.length - 1} dump`);
      expect(message).toContain('tables.t[0].body');
      expect(message).toContain('bytes differ');
      expect(message).toContain('expected row:');
      expect(message).toContain('actual row:');
      const sameUid = { ...dump, tables: { ...dump.tables, t: [dump.tables.t[0], { ...dump.tables.t[1], uid: '$rand:3' }] } };
      expect(failureOf([...happy.slice(0, -1), sameUid])).toContain('tables.t[1].uid');
      const noSequence = { ...dump, tables: { t: dump.tables.t } };
      expect(failureOf([...happy.slice(0, -1), noSequence])).toContain('unexpected ["sqlite_sequence"]');
    });

    it('lists every differing step with allSteps', () => {
      const wrong = { ...stampLater, returns: { now: 1, iso: 'nope', id: '$rand:2' } };
      let message = '';
      try {
        replayTrace(
          { format: 'piw-conformance-trace/1', name: 't', clockStart: 1789257600005, methods: [], steps: [open, wrong, closed] } as unknown as Trace,
          { Store, clock: jestClock, conformanceRoot: paths.root, allSteps: true },
        );
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toContain('2 of 3 steps differ');
      expect(message).toContain('step 1 call s.stamp');
      expect(message).toContain('step 2 call s.stamp');
    });

    it('names the step, the method and the path of the first difference', () => {
      const wrong = { ...stampLater, returns: { now: 1789257601005, iso: 'nope', id: '$rand:2' } };
      const message = failureOf([open, stamp, { do: 'tick', ms: 1000 }, wrong]);
      expect(message).toContain('trace t, step 3 call s.stamp');
      expect(message).toContain('at:       returns.iso');
      expect(message).toContain('expected: "nope"');
      expect(message).toContain('actual:   "2026-09-13T00:00:01.005Z"');
    });

    it('fails when a random value changes under one number or repeats under another', () => {
      expect(failureOf([open, stamp, stamp])).toContain('returns.id');
      const echo = { do: 'call', store: 's', method: 'echo', args: ['$rand:1'], returns: '$rand:2' };
      expect(failureOf([open, stamp, echo])).toMatch(/already \$rand:1/);
    });

    it('checks in-place argument changes both ways', () => {
      const setup = [open, { do: 'tick', ms: 1000 }, stampLater];
      expect(failureOf([...setup, { ...bump, argsAfter: undefined }])).toContain('argument changed in place');
      const sneaky = { do: 'call', store: 's', method: 'sneaky', args: [{ a: 1 }], returns: 1 };
      expect(failureOf([open, sneaky])).toContain('args[0].a');
    });

    it('reports unexpected throws and results, row counts and trace errors', () => {
      const close = { do: 'close', store: 's' };
      expect(failureOf([open, close, { ...closed, throws: undefined, returns: 1 }])).toContain(
        'expected a result, but the call threw TypeError: The database connection is not open',
      );
      expect(failureOf([open, closed])).toContain('expected the call to throw');
      expect(failureOf([open, write, { ...sql, changes: 2 }])).toContain('engine SQL changed 1 rows');
      expect(failureOf([open, { ...sql, sql: 'UPDATE nope SET x = 1' }])).toContain('engine SQL failed');
      expect(failureOf([{ ...open, throws: { name: 'Error', message: 'x' } }])).toContain('expected it to throw');
      expect(failureOf([{ ...open, options: { fail: true } }])).toContain('constructor threw Error: cannot open');
      expect(failureOf([{ do: 'close', store: 'nobody' }])).toContain('never opened');
      expect(failureOf([{ do: 'teleport' }])).toContain('unknown step kind');
      expect(failureOf([open, { do: 'call', store: 's', method: 'echo', args: ['$rand:7'], returns: 1 }])).toContain(
        '$rand:7 is used before a result bound it',
      );
    });

    const asyncFailureOf = async (steps: unknown[]): Promise<string> => {
      const trace = { format: 'piw-conformance-trace/1', name: 't', clockStart: 1789257600005, methods: [], steps } as unknown as Trace;
      try {
        await replayTraceAsync(trace, { Store, clock: jestClock, conformanceRoot: paths.root });
      } catch (error) {
        if (error instanceof TraceFailure) return error.message;
        throw error;
      }
      return '';
    };

    it('replays through store.async with the same steps and comparisons, after each Promise settles', async () => {
      FakeStore.opened = [];
      expect(await asyncFailureOf(happy)).toBe('');
      expect(FakeStore.opened).toHaveLength(1);
      // the in-place change is seen once the Promise has settled
      expect(await asyncFailureOf([open, { do: 'tick', ms: 1000 }, stampLater, { ...bump, argsAfter: undefined }])).toContain(
        'argument changed in place',
      );
      expect(await asyncFailureOf([open, { do: 'close', store: 's' }, { ...closed, throws: undefined, returns: 1 }])).toContain(
        'expected a result, but the call threw TypeError: The database connection is not open',
      );
      const wrong = { ...stampLater, returns: { now: 1789257601005, iso: 'nope', id: '$rand:2' } };
      expect(await asyncFailureOf([open, stamp, { do: 'tick', ms: 1000 }, wrong])).toContain('at:       returns.iso');
      expect(await asyncFailureOf([open, { do: 'call', store: 's', method: 'nope', args: [], returns: 1 }])).toContain(
        'the store has no async method nope',
      );
    });

    it('calls the store again from inside an argument and compares what the nested calls did', () => {
      const nested = (via: string, value: unknown, extra: object = {}) => ({
        $reenter: { via, call: { store: 's', method: 'stamp', args: [] }, value, ...extra },
      });
      const stamped = { returns: { now: 1789257600005, iso: '2026-09-13T00:00:00.005Z', id: '$rand:1' } };
      const call = (method: string, args: unknown[], rest: object) => ({ do: 'call', store: 's', method, args, ...rest });
      const viaGetter = call('readA', [{ a: nested('getter', 5) }], { reentered: [stamped], returns: 5 });
      expect(() => replay([open, viaGetter])).not.toThrow();
      expect(failureOf([open, { ...viaGetter, reentered: [] }])).toContain('1 nested calls, the reference made 0');
      expect(failureOf([open, call('echo', [{ a: nested('getter', 5) }], { reentered: [stamped], returns: {} })])).toContain(
        '0 nested calls, the reference made 1',
      );
      expect(() => replay([open, call('text', [nested('toString', 'five')], { reentered: [stamped], returns: 'five' })])).not.toThrow();
      const proxied = call('readA', [nested('proxy', { a: 1 })], { reentered: [stamped], returns: 1 });
      expect(() => replay([open, proxied])).not.toThrow();
      const noMethod = { throws: { name: 'Error', message: 'the store has no method nope' } };
      const rethrown = call('readA', [{ a: nested('getter', 5, { call: { store: 's', method: 'nope', args: [] }, rethrow: true }) }], {
        reentered: [noMethod],
        ...noMethod,
      });
      expect(() => replay([open, rethrown])).not.toThrow();
    });
  });
});
