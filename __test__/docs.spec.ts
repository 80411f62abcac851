// Every public method and option in index.d.ts has TSDoc, so an editor's hover explains it (the
// README promises as much). "Public": the members of the exported classes and interfaces, and the
// generated AsyncStore. "Option": a property of an object type written in a public method's
// parameters, or of an exported `…Options` type. ControllerStore is left out: it is the
// reference's interface, and it says its methods are documented on SqliteControllerStore.
// And docs/architecture.md names only files and Rust items that exist.
import fs from 'node:fs';
import path from 'node:path';

import ts from 'typescript';

const FILE = path.join(__dirname, '..', 'index.d.ts');
const UNDOCUMENTED_BY_DESIGN = new Set(['ControllerStore']);

function hasDoc(node: ts.Node): boolean {
  return ts.getJSDocCommentsAndTags(node).some((doc) => ts.isJSDoc(doc) && (doc.comment ?? '') !== '');
}

function memberName(member: ts.TypeElement | ts.ClassElement, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(member)) return 'constructor';
  return member.name === undefined ? '(anonymous)' : member.name.getText(source);
}

/** Object type literals written in `type`, or the literals an intersection or union of them holds. */
function literals(type: ts.TypeNode | undefined): ts.TypeLiteralNode[] {
  if (type === undefined) return [];
  if (ts.isTypeLiteralNode(type)) return [type];
  if (ts.isIntersectionTypeNode(type) || ts.isUnionTypeNode(type)) return type.types.flatMap(literals);
  if (ts.isParenthesizedTypeNode(type)) return literals(type.type);
  return [];
}

function undocumented(): string[] {
  const source = ts.createSourceFile(FILE, fs.readFileSync(FILE, 'utf8'), ts.ScriptTarget.Latest, true);
  const missing: string[] = [];
  const checkOptions = (owner: string, parameters: readonly ts.ParameterDeclaration[]) => {
    for (const parameter of parameters) {
      for (const literal of literals(parameter.type)) {
        for (const option of literal.members) {
          if (!hasDoc(option)) missing.push(`${owner}(${parameter.name.getText(source)}.${memberName(option, source)})`);
        }
      }
    }
  };
  for (const statement of source.statements) {
    const exported = ts.canHaveModifiers(statement) && ts.getModifiers(statement)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
    if (!exported) continue;
    if (ts.isClassDeclaration(statement) || ts.isInterfaceDeclaration(statement)) {
      const owner = statement.name?.text ?? '(anonymous)';
      if (UNDOCUMENTED_BY_DESIGN.has(owner)) continue;
      if (!hasDoc(statement)) missing.push(owner);
      const members: readonly (ts.ClassElement | ts.TypeElement)[] = statement.members;
      for (const member of members) {
        const name = `${owner}.${memberName(member, source)}`;
        const isPrivate = ts.canHaveModifiers(member) && ts.getModifiers(member)?.some((m) => m.kind === ts.SyntaxKind.PrivateKeyword);
        if (isPrivate) continue;
        // A constructor is documented through its @param tags or its options' own TSDoc.
        if (!ts.isConstructorDeclaration(member) && !hasDoc(member)) missing.push(name);
        if (ts.isMethodDeclaration(member) || ts.isMethodSignature(member) || ts.isConstructorDeclaration(member)) {
          checkOptions(name, member.parameters);
        }
      }
    } else if (ts.isTypeAliasDeclaration(statement) && statement.name.text.endsWith('Options')) {
      for (const literal of literals(statement.type)) {
        for (const option of literal.members) {
          if (!hasDoc(option)) missing.push(`${statement.name.text}.${memberName(option, source)}`);
        }
      }
    }
  }
  return missing;
}

test('every public method and option in index.d.ts has TSDoc', () => {
  expect(undocumented()).toEqual([]);
});

describe('docs/architecture.md', () => {
  const ROOT = path.join(__dirname, '..');
  const text = fs.readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const paths = [...text.matchAll(/`((?:src|lib|docs)\/[\w./-]+|index\.js)`/g)].map((match) => match[1]);

  it('is linked from the README', () => {
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')).toContain('(docs/architecture.md)');
  });

  it('names only files that exist', () => {
    expect(paths.length).toBeGreaterThan(30);
    expect(paths.filter((file) => !fs.existsSync(path.join(ROOT, file)))).toEqual([]);
  });

  it('names only functions that exist in the files it names them in', () => {
    // `file` `name`: a function or method named right after its file, e.g. `src/runs/reads.rs` `get_workflow_run`.
    const claims = [...text.matchAll(/`((?:src|lib)\/[\w./-]+|index\.js)` `(\w+)`/g)];
    expect(claims.length).toBeGreaterThan(3);
    const missing = claims.filter(([, file, name]) => !new RegExp(`\\b${name}\\b`).test(fs.readFileSync(path.join(ROOT, file), 'utf8')));
    expect(missing.map(([claim]) => claim)).toEqual([]);
  });
});

describe('the user-facing pages', () => {
  const ROOT = path.join(__dirname, '..');
  const pages = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', ...fs.readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`)];

  it('link only to files that exist', () => {
    const broken = pages.flatMap((page) =>
      [...fs.readFileSync(path.join(ROOT, page), 'utf8').matchAll(/\]\(((?!https?:|#)[^)#\s]+)(#[^)]*)?\)/g)]
        .map((match) => match[1])
        .filter((target) => !fs.existsSync(path.resolve(ROOT, path.dirname(page), target)))
        .map((target) => `${page} → ${target}`),
    );
    expect(broken).toEqual([]);
  });

  it('keep the README short and its two fresh-machine commands', () => {
    const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThan(260);
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toContain('npm ci && npm test');
  });
});
