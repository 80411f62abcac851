// `store.state.connection` against the dev dependency, better-sqlite3 12, whose SQLite the addon
// is built on: every scenario of support/connection-parity.ts.
import Database from 'better-sqlite3';

import { describeConnectionParity } from './support/connection-parity';

describeConnectionParity(Database);
