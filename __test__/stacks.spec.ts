// Where an error points: the stack of an error the store raises starts at the caller's line, not
// inside this package (lib/errors.js, index.js); a store.async rejection shows the awaiting
// callers (`at async …`), and with `asyncCallSites: true` the line that made the call. What the
// traces compare (name, message, own enumerable properties) is unchanged.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const { SqliteControllerStore, SqliteError } = require('../index.js');

const ROOT = path.join(__dirname, '..');
const HERE = path.basename(__filename);

let dir: string;
let store: any;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'piw-stacks-'));
  store = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir });
});

afterEach(() => {
  store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function frames(error: unknown): string[] {
  return String((error as Error).stack)
    .split('\n')
    .filter((line) => line.startsWith('    at '));
}

function isPackageFrame(line: string): boolean {
  return line.includes(path.join(ROOT, 'index.js')) || line.includes(path.join(ROOT, 'lib') + path.sep);
}

function thrownBy(run: () => unknown): Error {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}

function invalidPut(target: any) {
  return target.putResource({ controller: 'jobs', key: '', spec: {}, initialStatus: {} });
}

describe('synchronous errors', () => {
  it('start at the caller, with the name, message and own properties as before', () => {
    const error = thrownBy(function callerOfPut() {
      invalidPut(store);
    });
    expect(error.message).toBe('resource key is invalid');
    expect(Object.keys(error)).toEqual([]);
    const [first] = frames(error);
    expect(first).toContain('invalidPut');
    expect(first).toContain(HERE);
    expect(frames(error).some(isPackageFrame)).toBe(false);
    expect(frames(error).some((line) => line.includes('callerOfPut'))).toBe(true);
  });

  it('start at the caller for errors of the argument encoding too', () => {
    const spec: Record<string, unknown> = {};
    spec.self = spec;
    const error = thrownBy(() => store.putResource({ controller: 'jobs', key: 'k', spec, initialStatus: {} }));
    expect(frames(error)[0]).toContain(HERE);
    expect(frames(error).some(isPackageFrame)).toBe(false);
  });

  it("keep the stack of an error the caller's own code raised (a getter of an argument)", () => {
    const options = {
      controller: 'jobs',
      key: 'k',
      initialStatus: {},
      get spec(): unknown {
        throw new RangeError('thrown by the getter');
      },
    };
    const error = thrownBy(() => store.putResource(options));
    expect(error.message).toBe('thrown by the getter');
    expect(frames(error)[0]).toContain('get spec');
  });

  it('of the constructor start at the caller', () => {
    const error = thrownBy(function openMissing() {
      return new SqliteControllerStore(path.join(dir, 'missing', 'state.sqlite'), { readOnly: true, projectPath: dir });
    });
    expect(error.message).toMatch(/^Pi Workflows state database does not exist: /);
    expect(frames(error)[0]).toContain('openMissing');
    expect(frames(error).some(isPackageFrame)).toBe(false);
  });

  it('of SQLite keep their code and message', () => {
    const error = thrownBy(() => store.state.connection.exec('SELECT * FROM no_such_table'));
    expect(error).toBeInstanceOf(SqliteError);
    expect(error.message).toBe('no such table: no_such_table');
  });
});

describe('store.async rejections', () => {
  it('show the awaiting callers and no frame of this package', async () => {
    async function claimOfNull() {
      // Raised by the core, as the reference's read of `options.now` fails on null.
      return store.async.claimWorkflowRun(null as never);
    }
    async function awaitingCaller() {
      await claimOfNull();
    }
    const error = await awaitingCaller().then(
      () => undefined,
      (rejected: Error) => rejected,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toBe("Cannot read properties of null (reading 'now')");
    expect(frames(error).some(isPackageFrame)).toBe(false);
    // `at async awaitingCaller` (Jest's source maps print it without the `async`).
    expect(frames(error).some((line) => line.includes('awaitingCaller'))).toBe(true);
  });

  it('of the argument encoding start at the caller', async () => {
    const spec: Record<string, unknown> = {};
    spec.self = spec;
    const rejected = await store.async.putResource({ controller: 'jobs', key: 'k', spec, initialStatus: {} }).catch((error: Error) => error);
    expect(frames(rejected)[0]).toContain(HERE);
  });

  it('carry the call site with asyncCallSites: true, also without await', async () => {
    const traced = new SqliteControllerStore(path.join(dir, 'state.sqlite'), { projectPath: dir, asyncCallSites: true });
    try {
      function callSiteOfRead() {
        return traced.async.claimWorkflowRun(null as never);
      }
      const error = await callSiteOfRead().then(
        () => undefined,
        (rejected: Error) => rejected,
      );
      expect(error.message).toBe("Cannot read properties of null (reading 'now')");
      expect(Object.keys(error)).toEqual([]);
      expect(frames(error)[0]).toContain('callSiteOfRead');
      expect(frames(error)[0]).toContain(HERE);
      expect(frames(error).some(isPackageFrame)).toBe(false);
      // Records are unchanged by the option.
      await expect(traced.async.getWorkflowRun('missing')).resolves.toBeUndefined();
    } finally {
      traced.close();
    }
  });
});
