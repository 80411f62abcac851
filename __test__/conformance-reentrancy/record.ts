// Records the re-entrancy traces (README.md here) from the reference store: every case of
// cases.ts is run on the reference `SqliteControllerStore` with a frozen clock, with the
// replayer's own argument decoding (support/values.ts, support/reentry.ts), and written out as a
// `piw-conformance-trace/1` file with what the reference returned or threw, what each nested
// call returned or threw, and the dump of the file at the end.
//
//   node <esbuild> __test__/conformance-reentrancy/record.ts --bundle --platform=node \
//     --external:better-sqlite3 --outfile=/tmp/record-reentrancy.cjs
//   TZ=UTC PIW_REF=/work/ref NODE_PATH=$PWD/node_modules node /tmp/record-reentrancy.cjs
//
// PIW_REF is a reference build laid out as ../shared/difftest/README.md says (its
// bench/impl.mjs loads the reference). Never commits or copies the reference's code.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Bindings } from '../support/placeholders';
import { Outcome, Reentries } from '../support/reentry';
import { dumpDatabase } from '../support/sqlite';
import { constructorName, decode, Encoded, TextBlob } from '../support/values';
import { CASES, CaseStep } from './cases';

type Store = Record<string, unknown> & { close(): void };
type StoreClass = new (file: string, options: unknown) => Store;

/** Values the store makes up become placeholders, numbered in the replayer's walk order. */
class Namer {
  private readonly names = new Map<string, string>();
  private readonly counts = { rand: 0, env: 0, hash: 0 };

  /** `literals`: text the case itself passes (a digest there stays literal). */
  constructor(
    private readonly dir: string,
    private readonly literals: string,
  ) {}

  private name(kind: 'rand' | 'env' | 'hash', value: string): string {
    let name = this.names.get(value);
    if (name === undefined) {
      this.counts[kind] += 1;
      name = `$${kind}:${this.counts[kind]}`;
      this.names.set(value, name);
    }
    return name;
  }

  /** Every value named so far, with its placeholder. */
  entries(): [string, string][] {
    return [...this.names.entries()];
  }

  text(value: string): string {
    let out = value.split(this.dir).join('$DIR');
    if (/^[A-Za-z0-9_-]{43}$/.test(out)) return this.name('rand', out);
    out = out.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (id) => this.name('rand', id));
    const made = (kind: 'env' | 'hash') => (hex: string) => (this.literals.includes(hex) ? hex : this.name(kind, hex));
    out = out.replace(/(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])/g, made('hash'));
    return out.replace(/(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])/g, made('env'));
  }

  encode(value: unknown): Encoded {
    if (value === undefined) return { $undefined: true };
    if (value === null || typeof value === 'boolean') return value;
    if (typeof value === 'number') {
      if (Number.isNaN(value)) return { $number: 'NaN' };
      if (value === Infinity) return { $number: 'Infinity' };
      if (value === -Infinity) return { $number: '-Infinity' };
      if (Object.is(value, -0)) return { $number: '-0' };
      return value;
    }
    if (typeof value === 'bigint') {
      return Number.isSafeInteger(Number(value)) ? Number(value) : { $bigint: value.toString() };
    }
    if (typeof value === 'string') return this.text(value);
    if (value instanceof TextBlob) return { $text: this.text(value.text) };
    if (Buffer.isBuffer(value)) {
      const hex = value.toString('hex');
      return { $buffer: value.length === 32 && !this.literals.includes(hex) ? this.name('hash', hex) : hex };
    }
    if (Array.isArray(value)) return value.map((item) => this.encode(item));
    if (typeof value === 'object') {
      const out: Record<string, Encoded> = {};
      for (const key of Object.keys(value)) out[key] = this.encode((value as Record<string, unknown>)[key]);
      return out;
    }
    throw new Error(`cannot record a ${typeof value}`);
  }

  error(error: unknown): { name: string; message: string; props?: Encoded } {
    const record = error as Error & Record<string, unknown>;
    const props: Record<string, unknown> = {};
    for (const key of Object.keys(record)) if (key !== 'stack' && key !== 'message') props[key] = record[key];
    const out: { name: string; message: string; props?: Encoded } = {
      name: constructorName(error),
      message: this.text(String(record.message)),
    };
    if (Object.keys(props).length > 0) out.props = this.encode(props);
    return out;
  }

  outcome(outcome: Outcome): { returns: Encoded } | { throws: ReturnType<Namer['error']> } {
    return outcome.threw ? { throws: this.error(outcome.error) } : { returns: this.encode(outcome.value) };
  }
}

/** `Date.now()` and `new Date()` at a frozen time (every other use of `Date` unchanged). */
function freezeClock(start: number): { set(now: number): void; release(): void } {
  const RealDate = Date;
  let now = start;
  class FrozenDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(now);
      else super(...(args as [string]));
    }
    static now(): number {
      return now;
    }
  }
  globalThis.Date = FrozenDate as DateConstructor;
  return {
    set(value) {
      now = value;
    },
    release() {
      globalThis.Date = RealDate;
    },
  };
}

function record(Store: StoreClass, name: string, description: string, clockStart: number, steps: CaseStep[]): unknown {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'piw-reentrancy-')));
  const bindings = new Bindings(dir);
  const namer = new Namer(dir, JSON.stringify(steps));
  const stores = new Map<string, Store>();
  const reentries = new Reentries((id) => stores.get(id) as Store, bindings);
  const clock = freezeClock(clockStart);
  let now = clockStart;
  const out: unknown[] = [];
  const methods = new Set(['constructor', 'close']);
  try {
    for (const step of steps) {
      switch (step.do) {
        case 'open': {
          for (const made of step.mkdirs ?? []) fs.mkdirSync(bindings.substitute(made), { recursive: true });
          stores.set(step.store, new Store(bindings.substitute(step.file), decode(step.options, bindings)));
          out.push(step);
          break;
        }
        case 'call': {
          methods.add(step.method);
          const store = stores.get(step.store) as Store;
          const args = decode(step.args, bindings, reentries.hooks) as unknown[];
          reentries.take();
          let outcome: Outcome;
          try {
            outcome = { threw: false, value: (store[step.method] as (...a: unknown[]) => unknown)(...args) };
          } catch (error) {
            outcome = { threw: true, error };
          }
          const nested = reentries.take().map((item) => namer.outcome(item));
          // Bind the placeholders the replayer's walk meets first, so later args can use them.
          const result = namer.outcome(outcome);
          const recorded = { do: 'call', store: step.store, method: step.method, args: step.args, reentered: nested, ...result };
          if (nested.length === 0 && !JSON.stringify(step.args).includes('$reenter')) delete (recorded as { reentered?: unknown }).reentered;
          out.push(recorded);
          // Later args may name what this call made up (`$rand:N`): bind it as the replayer will.
          for (const [value, label] of namer.entries()) {
            if (bindings.match(label, value) !== null) throw new Error(`cannot bind ${label} to ${value}`);
          }
          break;
        }
        case 'tick':
          now += step.ms;
          clock.set(now);
          out.push(step);
          break;
        case 'close':
          (stores.get(step.store) as Store).close();
          out.push(step);
          break;
        case 'dump':
          out.push({ do: 'dump', file: step.file, tables: namer.encode(dumpDatabase(bindings.substitute(step.file))) });
          break;
      }
    }
  } finally {
    for (const store of stores.values()) {
      try {
        store.close();
      } catch {
        // closed by the case
      }
    }
    clock.release();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return {
    format: 'piw-conformance-trace/1',
    name,
    description,
    clockStart,
    clockStartIso: new Date(clockStart).toISOString(),
    methods: [...methods].sort(),
    steps: out,
  };
}

async function main(): Promise<void> {
  const refRoot = process.env.PIW_REF;
  if (refRoot === undefined) throw new Error('PIW_REF names the reference build (../shared/difftest/README.md)');
  const loader = path.join(refRoot, 'bench', 'impl.mjs');
  const { loadImpl } = (await import(loader)) as {
    loadImpl(options: { impl: string }): Promise<{ SqliteControllerStore: StoreClass }>;
  };
  const { SqliteControllerStore } = await loadImpl({ impl: 'ts' });
  const target = path.join(__dirname_of(), 'traces');
  fs.mkdirSync(target, { recursive: true });
  for (const item of CASES) {
    const trace = record(SqliteControllerStore, item.name, item.description, item.clockStart, item.steps);
    fs.writeFileSync(path.join(target, `${item.name}.json`), `${JSON.stringify(trace, null, 1)}\n`);
    process.stdout.write(`${item.name}: ${item.steps.length} steps\n`);
  }
}

/** This directory in the repository (the bundle runs from elsewhere). */
function __dirname_of(): string {
  return process.env.PIW_REENTRANCY_DIR ?? path.join(process.cwd(), '__test__', 'conformance-reentrancy');
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack}\n`);
  process.exit(1);
});
