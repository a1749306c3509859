'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { greet } = require('../index.js');

test('greets by name', () => {
  assert.strictEqual(greet('Ada'), 'Hello, Ada!');
});

test('greets the empty name', () => {
  assert.strictEqual(greet(''), 'Hello, !');
});

test('keeps unicode', () => {
  assert.strictEqual(greet('Zoë'), 'Hello, Zoë!');
});

test('keeps spaces', () => {
  assert.strictEqual(greet('Ada Lovelace'), 'Hello, Ada Lovelace!');
});

test('returns a string', () => {
  assert.strictEqual(typeof greet(1), 'string');
});
