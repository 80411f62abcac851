'use strict';
// `node scripts/module-cycles.js [SRC]`: the import cycles between the crate's modules.
//
// Each `.rs` file under `src/` is one module (`state/blobs.rs` is `state::blobs`, `state/mod.rs`
// is `state`, `lib.rs` the crate root). A module imports another when its code names a path into
// it: a `use` declaration (groups, `self`, `super`, `as` expanded) or a `crate::…`/`super::…`/
// `self::…` path in an expression; a path names the deepest file module it reaches. Test code is
// left out: `#[cfg(test)]` items (inline `mod tests { … }` and test-only files). Comments and
// string literals are stripped first, so doc links and SQL do not count.
//
// An edge lies on a cycle when both its ends are in one strongly connected component. Prints
// each such edge as `from -> to`, one a line, sorted; exits 1 when there is any. Used by
// `__test__/module-cycles.spec.ts`, which holds the list of today's cycles that may only shrink.

const fs = require('node:fs');
const path = require('node:path');

/** The module path (`a::b`) of `file`, relative to `src`; `crate` for the root. */
function moduleOf(relative) {
  const parts = relative.replace(/\\/g, '/').replace(/\.rs$/, '').split('/');
  if (parts[parts.length - 1] === 'mod') parts.pop();
  if (parts.length === 1 && (parts[0] === 'lib' || parts[0] === 'main')) return 'crate';
  return ['crate', ...parts].join('::');
}

function rustFiles(dir, root = dir) {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return rustFiles(full, root);
      return entry.name.endsWith('.rs') ? [path.relative(root, full)] : [];
    })
    .sort();
}

/** `source` without comments, string/char literals (kept as empty quotes) and raw strings. */
function stripNoise(source) {
  let out = '';
  let i = 0;
  while (i < source.length) {
    const c = source[i];
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      while (i < source.length && source[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < source.length && depth > 0) {
        if (source[i] === '/' && source[i + 1] === '*') (depth++, (i += 2));
        else if (source[i] === '*' && source[i + 1] === '/') (depth--, (i += 2));
        else i++;
      }
    } else if ((c === 'r' || (c === 'b' && next === 'r')) && /^b?r#*"/.test(source.slice(i, i + 40)) && !/\w/.test(source[i - 1] ?? '')) {
      const [opening] = /^b?r(#*)"/.exec(source.slice(i));
      const closing = `"${opening.slice(opening.indexOf('r') + 1, -1)}`;
      const end = source.indexOf(closing, i + opening.length);
      i = end < 0 ? source.length : end + closing.length;
      out += '""';
    } else if (c === '"') {
      i++;
      while (i < source.length && source[i] !== '"') i += source[i] === '\\' ? 2 : 1;
      i++;
      out += '""';
    } else if (c === "'" && /^'(\\.|[^'\\])'/.test(source.slice(i, i + 12))) {
      // A char literal ('x', '\n', '"'); a lifetime ('a) has no closing quote and stays.
      i += /^'(\\u\{[0-9a-fA-F]+\}|\\.|[^'\\])'/.exec(source.slice(i))[0].length;
      out += "''";
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

/** The end (exclusive) of the item starting at `start`: its `;` or its balanced `{ … }`. */
function itemEnd(code, start) {
  for (let i = start; i < code.length; i++) {
    if (code[i] === ';') return i + 1;
    if (code[i] === '{') {
      let depth = 0;
      for (let j = i; j < code.length; j++) {
        if (code[j] === '{') depth++;
        else if (code[j] === '}' && --depth === 0) return j + 1;
      }
      return code.length;
    }
  }
  return code.length;
}

/**
 * `code` without its `#[cfg(test)]` (or `#[cfg(all(test, …))]`) items, and the names of the file
 * modules they declared.
 */
function stripTests(code) {
  const testModules = [];
  const marker = /#\[cfg\((?:test|all\(test(?:\s*,[^()]*)?\))\)\]/g;
  let out = '';
  let from = 0;
  let match;
  while ((match = marker.exec(code)) !== null) {
    if (match.index < from) continue;
    const end = itemEnd(code, match.index + match[0].length);
    const item = code.slice(match.index + match[0].length, end);
    const declared = /^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;/.exec(item);
    if (declared) testModules.push(declared[1]);
    out += code.slice(from, match.index);
    from = end;
    marker.lastIndex = end;
  }
  return { code: out + code.slice(from), testModules };
}

/**
 * Expands one `use` tree (`a::{b, c::{self, d as e}}`) into `{ path, name }` per leaf: the path as
 * segments and the name it brings into scope (`b`, `c`, `e`).
 */
function expandUseTree(tree) {
  const text = tree.replace(/\s+as\s+/g, '@').replace(/\s+/g, '');
  let i = 0;
  function parseTree(prefix) {
    const segments = [...prefix];
    const paths = [];
    for (;;) {
      if (text[i] === '{') {
        i++;
        while (text[i] !== '}') {
          paths.push(...parseTree(segments));
          if (text[i] === ',') i++;
        }
        i++;
        return paths;
      }
      const name = /^(\*|[A-Za-z_][A-Za-z0-9_]*)/.exec(text.slice(i));
      if (!name) return paths;
      i += name[0].length;
      if (name[0] !== 'self' || segments.length === 0) segments.push(name[0]);
      if (text.startsWith('::', i)) {
        i += 2;
        continue;
      }
      const alias = /^@([A-Za-z_][A-Za-z0-9_]*)/.exec(text.slice(i));
      if (alias) i += alias[0].length;
      paths.push({ path: segments, name: alias ? alias[1] : segments[segments.length - 1] });
      return paths;
    }
  }
  return parseTree([]);
}

/**
 * The paths (segment arrays) that `code` names: its `use` declarations, then each path in its
 * other code that starts with `crate`, `super`, `self` or a name a `use` brought in, with that
 * name replaced by what it stands for. Other paths (`std::…`, locals) are left for the caller.
 */
function namedPaths(code) {
  const used = [];
  const rest = code.replace(/\buse\s+([^;]+);/g, (_, tree) => {
    used.push(...expandUseTree(tree.replace(/^pub(\([^)]*\))?\s+/, '')));
    return ';';
  });
  const scope = new Map(used.filter(({ name }) => name !== '*').map(({ path, name }) => [name, path]));
  const paths = used.map(({ path }) => path);
  for (const match of rest.matchAll(/(?<![\w:])[A-Za-z_][A-Za-z0-9_]*(?:\s*::\s*[A-Za-z_][A-Za-z0-9_]*)+/g)) {
    const [first, ...tail] = match[0].split(/\s*::\s*/);
    if (first === 'crate' || first === 'super' || first === 'self') paths.push([first, ...tail]);
    else if (scope.has(first)) paths.push([...scope.get(first), ...tail]);
    else paths.push([first, ...tail]);
  }
  return paths;
}

/** The module graph of the crate under `src`: `Map<module, Set<module it imports>>`. */
function moduleGraph(src) {
  const files = rustFiles(src);
  const parsed = files.map((relative) => {
    const module = moduleOf(relative);
    const { code, testModules } = stripTests(stripNoise(fs.readFileSync(path.join(src, relative), 'utf8')));
    return { module, code, testModules };
  });
  const excluded = new Set(parsed.flatMap(({ module, testModules }) => testModules.map((name) => `${module}::${name}`)));
  const isExcluded = (module) => [...excluded].some((test) => module === test || module.startsWith(`${test}::`));
  const modules = new Set(parsed.map(({ module }) => module).filter((module) => !isExcluded(module)));
  const graph = new Map([...modules].map((module) => [module, new Set()]));
  for (const { module, code } of parsed) {
    if (!modules.has(module)) continue;
    const here = module.split('::');
    for (const segments of namedPaths(code)) {
      let absolute;
      if (segments[0] === 'crate') absolute = segments;
      else if (segments[0] === 'self') absolute = [...here, ...segments.slice(1)];
      else if (segments[0] === 'super') {
        let base = here;
        let index = 0;
        while (segments[index] === 'super') (base = base.slice(0, -1), index++);
        absolute = [...base, ...segments.slice(index)];
      } else if (modules.has([...here, segments[0]].join('::'))) absolute = [...here, ...segments];
      else if (module === 'crate' || modules.has(`crate::${segments[0]}`)) {
        // In the root, `use state::…` names a top-level module; elsewhere a bare first segment
        // is an external crate (std, rusqlite) unless it is a child of this module (above).
        if (module !== 'crate') continue;
        absolute = ['crate', ...segments];
      } else continue;
      let target;
      for (let length = absolute.length; length > 0 && target === undefined; length--) {
        const candidate = absolute.slice(0, length).join('::');
        if (modules.has(candidate)) target = candidate;
      }
      if (target !== undefined && target !== module) graph.get(module).add(target);
    }
  }
  return graph;
}

/** The edges `from -> to` whose two ends lie in one strongly connected component (Tarjan). */
function cyclicEdges(graph) {
  const index = new Map();
  const low = new Map();
  const component = new Map();
  const stack = [];
  let counter = 0;
  function visit(node) {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node), low.get(next)));
      } else if (!component.has(next)) {
        low.set(node, Math.min(low.get(node), index.get(next)));
      }
    }
    if (low.get(node) === index.get(node)) {
      let member;
      do {
        member = stack.pop();
        component.set(member, node);
      } while (member !== node);
    }
  }
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  const edges = [];
  for (const [from, targets] of graph) {
    for (const to of targets) if (component.get(from) === component.get(to)) edges.push(`${from} -> ${to}`);
  }
  return edges.sort();
}

module.exports = { moduleGraph, cyclicEdges, expandUseTree, stripNoise, stripTests };

if (require.main === module) {
  const edges = cyclicEdges(moduleGraph(process.argv[2] ?? path.join(__dirname, '..', 'src')));
  for (const edge of edges) console.log(edge);
  process.exitCode = edges.length === 0 ? 0 : 1;
}
