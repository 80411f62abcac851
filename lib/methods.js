'use strict';
// The store's public methods as the JS layer needs them: the core's method table (src/methods/,
// the one list of names, in call-index order) with each method's conversions compiled once.
// Each entry is `{name, index, reads, time, date, json, claim, echo, echoProps, lease, plain}`;
// `reads`: the method only reads; what each conversion means is documented on `Conversions` in
// src/methods/row.rs.

const { binding } = require('./native.js');

function parsePath(spec) {
  const [index, property] = spec.split('.');
  return { index: Number(index), property };
}

function optionalPath(spec) {
  return spec === null ? undefined : parsePath(spec);
}

const METHODS = JSON.parse(binding.methodTable()).map((method, index) => {
  const spec = {
    name: method.name,
    index,
    reads: method.reads,
    time: method.time.map(parsePath),
    date: method.date.map(parsePath),
    json: method.json.map(parsePath),
    claim: optionalPath(method.claim),
    echo: optionalPath(method.echo),
    echoProps: method.echoProps.length === 0 ? undefined : method.echoProps,
    lease: method.lease === null ? undefined : { now: parsePath(method.lease.now), ms: parsePath(method.lease.ms) },
  };
  // No argument to convert before a `store.async` call (index.js then encodes them as they are).
  spec.plain = spec.time.length === 0 && spec.date.length === 0 && spec.json.length === 0;
  return spec;
});

module.exports = { METHODS };
