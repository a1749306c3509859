'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { greet } = require('../index.js');

test('greets by name', () => {
  assert.strictEqual(greet('Ada'), 'Hello, Ada!');
});
