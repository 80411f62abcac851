// No Rust module imports a module that imports it. `scripts/module-cycles.js` lists the import
// edges that lie on a cycle between the crate's modules (test code left out); there are none,
// and a new cycle fails. The synthetic crates check that the checker sees what it must and no
// more.

import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const { moduleGraph, cyclicEdges, expandUseTree } = require('../scripts/module-cycles.js');

function crate(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'module-cycles-'));
  for (const [name, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

describe('module import cycles', () => {
  it('finds no cycle in the crate', () => {
    expect(cyclicEdges(moduleGraph(path.join(__dirname, '..', 'src')))).toEqual([]);
  });

  it('expands use trees', () => {
    expect(expandUseTree('crate::{a::{self, B as C}, d::e::*}')).toEqual([
      { path: ['crate', 'a'], name: 'a' },
      { path: ['crate', 'a', 'B'], name: 'C' },
      { path: ['crate', 'd', 'e', '*'], name: '*' },
    ]);
  });

  it('finds a cycle through use groups, super, expression paths and imported names', () => {
    const dir = crate({
      'lib.rs': 'pub mod a;\npub mod b;\npub mod c;\npub mod d;\n',
      'a/mod.rs': 'pub mod x;\npub mod y;\n',
      'a/x.rs': 'use super::{y::{self as why}};\npub fn f() { why::g(); }\n',
      'a/y.rs': 'pub fn g() { crate::a::x::f(); }\n',
      'b.rs': 'use crate::c;\npub fn h() { c::k(); }\n',
      'c.rs': 'pub fn k() { let _ = crate :: b :: h; }\n',
      'd.rs': 'use crate::a::x::f;\n',
    });
    expect(cyclicEdges(moduleGraph(dir))).toEqual([
      'crate::a::x -> crate::a::y',
      'crate::a::y -> crate::a::x',
      'crate::b -> crate::c',
      'crate::c -> crate::b',
    ]);
  });

  it('does not count comments, strings or test code', () => {
    const dir = crate({
      'lib.rs': 'pub mod a;\npub mod b;\n#[cfg(test)]\nmod t;\n',
      'a.rs': 'use crate::b::g;\npub fn f() { g(); }\n',
      'b.rs': [
        '//! See [`crate::a::f`].',
        '/* crate::a::f() */',
        'pub fn g() { let _ = "crate::a::f"; let _ = r#"crate::a::f"#; let _ = \'"\'; }',
        '#[cfg(test)]',
        'mod tests {',
        '    use crate::a::f;',
        '    fn t() { { f(); } }',
        '}',
        '#[cfg(all(test, unix))]',
        'mod unix_tests {',
        '    use crate::a::*;',
        '}',
        '',
      ].join('\n'),
      't.rs': 'use crate::a::f;\nuse crate::b::g;\n',
    });
    expect(cyclicEdges(moduleGraph(dir))).toEqual([]);
    expect([...moduleGraph(dir).keys()].sort()).toEqual(['crate', 'crate::a', 'crate::b']);
  });
});
