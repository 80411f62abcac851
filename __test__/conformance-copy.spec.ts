// The conformance data the suite replays is the repository's own copy (__test__/conformance), so a
// fresh clone with nothing beside it runs every trace, and `npm test` reads nothing outside the
// repository. Given the recorded set it was copied from (PIW_CONFORMANCE_SOURCE; `npm run
// test:conformance-copy` names the checkout beside the repository, ../shared/conformance), the
// copy must be byte-equal to it: a re-recorded trace set is copied in, never edited here.
import fs from 'node:fs';
import path from 'node:path';

import { conformancePaths, IN_REPO_CONFORMANCE } from './support/paths';

const SOURCE = process.env.PIW_CONFORMANCE_SOURCE === undefined ? undefined : path.resolve(process.env.PIW_CONFORMANCE_SOURCE);

/** Every file below `dir`, as sorted paths relative to it. */
function files(dir: string): string[] {
  const found: string[] = [];
  const walk = (relative: string) => {
    for (const entry of fs.readdirSync(path.join(dir, relative), { withFileTypes: true })) {
      const name = path.join(relative, entry.name);
      if (entry.isDirectory()) walk(name);
      else found.push(name.split(path.sep).join('/'));
    }
  };
  walk('');
  return found.sort();
}

test('without PIW_CONFORMANCE_DIR the suite reads the copy in the repository', () => {
  const paths = conformancePaths({});
  expect(paths).toEqual({
    root: IN_REPO_CONFORMANCE,
    traces: path.join(IN_REPO_CONFORMANCE, 'traces'),
    fixtures: path.join(IN_REPO_CONFORMANCE, 'fixtures'),
    hostile: path.join(IN_REPO_CONFORMANCE, 'hostile'),
  });
  const copy = files(IN_REPO_CONFORMANCE);
  expect(copy).toEqual(
    expect.arrayContaining([
      'README.md',
      'fixtures/schema.json',
      'fixtures/state-0.16.1.expected.json',
      'fixtures/state-0.16.1.sqlite',
    ]),
  );
  expect(copy.filter((file) => file.startsWith('traces/')).length).toBeGreaterThan(40);
  expect(copy.filter((file) => file.startsWith('hostile/')).length).toBeGreaterThan(10);
});

(SOURCE === undefined ? describe.skip : describe)(`the copy equals PIW_CONFORMANCE_SOURCE (${SOURCE})`, () => {
  const source = SOURCE ?? '';
  it('holds the same files', () => {
    expect(files(IN_REPO_CONFORMANCE)).toEqual(files(source));
  });

  it('holds the same bytes in each', () => {
    const differing = files(source).filter((file) => {
      const copy = path.join(IN_REPO_CONFORMANCE, file);
      return !fs.existsSync(copy) || !fs.readFileSync(copy).equals(fs.readFileSync(path.join(source, file)));
    });
    expect(differing).toEqual([]);
  });
});
