// The cluster suites (npm run test:cluster): they start a local dqlite cluster themselves.
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/cluster/**/*.cluster.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] },
  testTimeout: 120000,
};
