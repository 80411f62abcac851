// ESLint 9 flat config, run by `npm test` (through `npm run lint`) on the JS and the TS specs.
// Rules are the recommended sets of @eslint/js and typescript-eslint, with the few changes below,
// each with its reason. No type-aware rules: they would need a full type check on every run.
const js = require('@eslint/js');
const tseslint = require('typescript-eslint');
const globals = require('globals');

module.exports = tseslint.config(
  {
    ignores: ['node_modules/', 'target/', 'npm/', 'coverage/', 'binding.js', 'binding.d.ts', '**/*.d.ts'],
  },
  {
    files: ['**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: { ecmaVersion: 2022, sourceType: 'commonjs', globals: { ...globals.node } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // Names starting with `_` are deliberately unused (positional parameters, skipped items).
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      'no-new-wrappers': 'error',
    },
  },
  {
    files: ['__test__/**/*.js'],
    languageOptions: { globals: { ...globals.jest } },
  },
  {
    files: ['**/*.ts'],
    extends: [js.configs.recommended, ...tseslint.configs.recommended],
    languageOptions: { globals: { ...globals.node, ...globals.jest } },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // The specs load the package and its JS helpers with `require` on purpose: `index.js` as a
      // CommonJS consumer loads it (cast to the shape under test), and the helpers under
      // `__test__/reliability/`, `lib/` and `scripts/` are plain JS with no declarations.
      '@typescript-eslint/no-require-imports': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // The specs hand the store untyped and hostile values and read raw SQLite rows: `any` is
      // the honest type there (`unknown` would need a cast at every use, hiding nothing).
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    // Compile-time type assertions, checked by `tsc` and never run: a value declared only to
    // take its `typeof` is how they test, so "assigned but only used as a type" is the point.
    files: ['__test__/types/**/*.ts'],
    rules: { '@typescript-eslint/no-unused-vars': 'off' },
  },
);
