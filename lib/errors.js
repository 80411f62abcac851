'use strict';
// The reference's error classes. This file is evaluated in the caller's realm (inside Jest, the
// test file's), so `instanceof` works there, and `name` is an own enumerable property as in the
// reference.

class ResourceConflictError extends Error {
  constructor(controller, key) {
    super(`Controller resource ${controller}/${key} changed during reconciliation`);
    this.name = 'ResourceConflictError';
  }
}

class ResourceNotFoundError extends Error {
  constructor(controller, key) {
    super(`Controller resource not found: ${controller}/${key}`);
    this.name = 'ResourceNotFoundError';
  }
}

class EffectRequestConflictError extends Error {
  constructor(key) {
    super(`Effect key ${JSON.stringify(key)} was reused with a different request`);
    this.name = 'EffectRequestConflictError';
  }
}

class WorkflowRequestConflictError extends Error {
  constructor(key) {
    super(`Workflow request key ${JSON.stringify(key)} was reused with different input`);
    this.name = 'WorkflowRequestConflictError';
  }
}

// better-sqlite3's error shape: `name` on the prototype, `code` as an own property.
class SqliteError extends Error {
  constructor(message, code) {
    super(message);
    this.code = code;
  }
}
Object.defineProperty(SqliteError.prototype, 'name', {
  value: 'SqliteError',
  writable: true,
  configurable: true,
  enumerable: false,
});

/** Node's argument errors carry `code` as an own enumerable property. */
function withCode(error, code) {
  if (code !== undefined) error.code = code;
  return error;
}

/** Rebuilds the error the core reported (`{kind, message?, code?, args?}`). */
function errorFromWire(wire) {
  switch (wire.kind) {
    case 'TypeError':
      return withCode(new TypeError(wire.message), wire.code);
    case 'RangeError':
      return withCode(new RangeError(wire.message), wire.code);
    case 'SqliteError':
      return new SqliteError(wire.message, wire.code);
    case 'ResourceConflictError':
      return new ResourceConflictError(...wire.args);
    case 'ResourceNotFoundError':
      return new ResourceNotFoundError(...wire.args);
    case 'EffectRequestConflictError':
      return new EffectRequestConflictError(...wire.args);
    case 'WorkflowRequestConflictError':
      return new WorkflowRequestConflictError(...wire.args);
    default:
      return withCode(new Error(wire.message), wire.code);
  }
}

module.exports = {
  ResourceConflictError,
  ResourceNotFoundError,
  EffectRequestConflictError,
  WorkflowRequestConflictError,
  SqliteError,
  errorFromWire,
};
