'use strict';
// The subset of better-sqlite3's `Database` API that code around the store uses, over the very
// connection the store uses (so a test's `INSERT` is seen by the next store call, and a store
// call inside `transaction()` fails exactly as it does with better-sqlite3).

const { checked, parsed } = require('./native.js');

function encodeValue(value) {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'number':
      return Number.isFinite(value) ? value : { $f: String(value) };
    case 'string':
      return value;
    case 'bigint':
      return { $i: value.toString() };
    default:
      if (value instanceof Uint8Array) {
        return { $b: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64') };
      }
      return false; // rejected by the core with better-sqlite3's TypeError
  }
}

function isNamedParameters(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/** better-sqlite3's argument rules: arrays spread one level, one plain object holds named values. */
function encodeParameters(parameters) {
  const positional = [];
  let named = null;
  for (const parameter of parameters) {
    if (Array.isArray(parameter)) positional.push(...parameter.map(encodeValue));
    else if (isNamedParameters(parameter)) {
      named = named ?? {};
      for (const [key, value] of Object.entries(parameter)) named[key] = encodeValue(value);
    } else positional.push(encodeValue(parameter));
  }
  return JSON.stringify({ positional, named });
}

function decodeValue(value) {
  if (value === null || typeof value !== 'object') return value;
  if (value.$b !== undefined) return Buffer.from(value.$b, 'base64');
  if (value.$i !== undefined) return BigInt(value.$i);
  return Number(value.$f);
}

/** A toggle argument as better-sqlite3 takes one: none is `true`, anything but a boolean throws. */
function toggleOf(args) {
  if (args.length === 0) return true;
  if (typeof args[0] !== 'boolean') throw new TypeError('Expected first argument to be a boolean');
  return args[0];
}

class Statement {
  #connection;
  #native;
  #pluck = false;
  #raw = false;
  #expand = false;
  #safeIntegers;
  #bound;

  /** `pragmaMode`: made by `pragma()`, which reads a statement without result columns too. */
  constructor(connection, native, source, info, pragmaMode = false) {
    this.#connection = connection;
    this.#native = native;
    this.#safeIntegers = connection._defaultSafeIntegers;
    Object.defineProperties(this, {
      source: { value: source, enumerable: true },
      reader: { value: info.reader || pragmaMode, enumerable: true },
      readonly: { value: info.readonly, enumerable: true },
    });
    this._columns = info.columns;
  }

  get database() {
    return this.#connection;
  }

  /** Always false: results are read completely before a call returns. */
  get busy() {
    return false;
  }

  /** Binds parameters for every later execution, as better-sqlite3 does. */
  bind(...parameters) {
    if (this.#bound !== undefined) {
      throw new TypeError('The bind() method can only be invoked once per statement object');
    }
    encodeParameters(parameters);
    this.#bound = parameters;
    return this;
  }

  #parameters(parameters) {
    if (this.#bound === undefined) return parameters;
    if (parameters.length > 0) throw new TypeError('This statement already has bound parameters');
    return this.#bound;
  }

  run(...parameters) {
    this.#connection._assertOpen();
    const result = parsed(this.#native.run(this.source, encodeParameters(this.#parameters(parameters))));
    return {
      changes: result.changes,
      lastInsertRowid: this.#safeIntegers ? BigInt(result.lastInsertRowid) : result.lastInsertRowid,
    };
  }

  get(...parameters) {
    const rows = this.#query(parameters, true);
    return rows[0];
  }

  all(...parameters) {
    return this.#query(parameters, false);
  }

  *iterate(...parameters) {
    yield* this.#query(parameters, false);
  }

  pluck(...toggle) {
    this.#pluck = this.#readerToggle('pluck', toggle);
    if (this.#pluck) this.#raw = this.#expand = false;
    return this;
  }

  raw(...toggle) {
    this.#raw = this.#readerToggle('raw', toggle);
    if (this.#raw) this.#pluck = this.#expand = false;
    return this;
  }

  /** Rows keyed by table name, expressions under `$`. */
  expand(...toggle) {
    this.#expand = this.#readerToggle('expand', toggle);
    if (this.#expand) this.#pluck = this.#raw = false;
    return this;
  }

  safeIntegers(...toggle) {
    this.#safeIntegers = toggleOf(toggle);
    return this;
  }

  #readerToggle(method, toggle) {
    if (!this.reader) throw new TypeError(`The ${method}() method is only for statements that return data`);
    return toggleOf(toggle);
  }

  columns() {
    if (!this.reader) {
      throw new TypeError('The columns() method is only for statements that return data');
    }
    return this._columns.map((column) => ({ ...column }));
  }

  #query(parameters, first) {
    this.#connection._assertOpen();
    if (!this.reader) {
      throw new TypeError('This statement does not return data. Use run() instead');
    }
    const reply = parsed(
      this.#native.query(this.source, encodeParameters(this.#parameters(parameters)), this.#safeIntegers, first),
    );
    const { columns, rows } = reply;
    return rows.map((values) => {
      const decoded = values.map(decodeValue);
      if (this.#pluck) return decoded[0];
      if (this.#raw) return decoded;
      const row = {};
      columns.forEach((name, index) => {
        if (this.#expand) {
          const table = this._columns[index]?.table ?? '$';
          row[table] = row[table] ?? {};
          row[table][name] = decoded[index];
        } else {
          row[name] = decoded[index];
        }
      });
      return row;
    });
  }
}

class Connection {
  #native;

  constructor(native, name, readonly) {
    this.#native = native;
    this._defaultSafeIntegers = false;
    Object.defineProperties(this, {
      name: { value: name, enumerable: true },
      readonly: { value: readonly, enumerable: true },
      memory: { value: false, enumerable: true },
    });
  }

  get open() {
    return this.#native.isOpen;
  }

  get inTransaction() {
    return this.#native.isOpen && this.#native.inTransaction;
  }

  _assertOpen() {
    if (!this.#native.isOpen) throw new TypeError('The database connection is not open');
  }

  prepare(source) {
    return this.#prepare(source, false);
  }

  #prepare(source, pragmaMode) {
    this._assertOpen();
    if (typeof source !== 'string') throw new TypeError('Expected first argument to be a string');
    return new Statement(this, this.#native, source, parsed(this.#native.describe(source)), pragmaMode);
  }

  exec(source) {
    this._assertOpen();
    if (typeof source !== 'string') throw new TypeError('Expected first argument to be a string');
    checked(this.#native.exec(source));
    return this;
  }

  /** As better-sqlite3's: a setter (no result columns) gives `[]`, or `undefined` when simple. */
  pragma(source, options) {
    if (options == null) options = {};
    if (typeof source !== 'string') throw new TypeError('Expected first argument to be a string');
    if (typeof options !== 'object') throw new TypeError('Expected second argument to be an options object');
    let simple = false;
    if ('simple' in options && typeof (simple = options.simple) !== 'boolean') {
      throw new TypeError('Expected the "simple" option to be a boolean');
    }
    const statement = this.#prepare(`PRAGMA ${source}`, true);
    return simple ? statement.pluck().get() : statement.all();
  }

  defaultSafeIntegers(...toggle) {
    this._defaultSafeIntegers = toggleOf(toggle);
    return this;
  }

  /**
   * better-sqlite3's transaction functions: savepoints when nested, a returned promise refused
   * (and rolled back), and the same shape — every variant carries the four variants
   * (non-enumerable) and `database`.
   */
  transaction(fn) {
    if (typeof fn !== 'function') throw new TypeError('Expected first argument to be a function');
    const connection = this;
    const savepoint = '"\t_bs3.\t"';
    const variant = (begin) =>
      function sqliteTransaction(...args) {
        const nested = connection.inTransaction;
        connection.exec(nested ? `SAVEPOINT ${savepoint}` : begin);
        try {
          const result = Reflect.apply(fn, this, args);
          if (result && typeof result.then === 'function') {
            throw new TypeError('Transaction function cannot return a promise');
          }
          connection.exec(nested ? `RELEASE ${savepoint}` : 'COMMIT');
          return result;
        } catch (error) {
          if (connection.inTransaction) {
            connection.exec(nested ? `ROLLBACK TO ${savepoint}` : 'ROLLBACK');
            if (nested) connection.exec(`RELEASE ${savepoint}`);
          }
          throw error;
        }
      };
    const variants = {
      default: variant('BEGIN'),
      deferred: variant('BEGIN DEFERRED'),
      immediate: variant('BEGIN IMMEDIATE'),
      exclusive: variant('BEGIN EXCLUSIVE'),
    };
    const properties = {};
    for (const [name, value] of Object.entries(variants)) properties[name] = { value };
    properties.database = { value: this, enumerable: true };
    for (const value of Object.values(variants)) Object.defineProperties(value, properties);
    return variants.default;
  }

  /** Closes the connection; then throws a failure of the open's blob prune no call reported yet. */
  close() {
    checked(this.#native.close());
    return this;
  }
}

module.exports = { Connection, Statement };
