'use strict';
// Rewrites the README's API status table from what the built addon implements.
const fs = require('node:fs');
const path = require('node:path');

const { apiTable } = require('./api-table.js');
const { binding } = require('../lib/native.js');

const file = path.join(__dirname, '..', 'README.md');
const readme = fs.readFileSync(file, 'utf8');
const [before, rest] = readme.split('<!-- api-table:start -->');
const after = rest.split('<!-- api-table:end -->')[1];
const table = apiTable(new Set(binding.implementedMethods()));
fs.writeFileSync(file, `${before}<!-- api-table:start -->\n${table}\n<!-- api-table:end -->${after}`);
