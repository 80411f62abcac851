'use strict';
// The compiled addon (found by ./loader.js) and the decoding of its string replies (see src/addon/mod.rs).

const binding = require('./loader.js').loadBinding();
binding.setHelpers(require('./computed.js'));
const { errorFromWire } = require('./errors.js');

/** Throws the error an encoded reply (`!{…}`) carries; returns other replies unchanged. */
function checked(reply) {
  if (reply.charCodeAt(0) === 33 /* ! */) throw errorFromWire(JSON.parse(reply.slice(1)));
  return reply;
}

/** A JSON reply, or undefined for `""`. */
function parsed(reply) {
  const text = checked(reply);
  return text === '' ? undefined : JSON.parse(text);
}

/** Runs a native factory whose failures carry an encoded error as their message. */
function created(factory) {
  try {
    return factory();
  } catch (error) {
    // Native errors come from Node's main realm, where `instanceof Error` fails inside Jest.
    const message = typeof error?.message === 'string' ? error.message : '';
    if (message.startsWith('!{')) throw errorFromWire(JSON.parse(message.slice(1)));
    throw error;
  }
}

module.exports = { binding, checked, parsed, created };
