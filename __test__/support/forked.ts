// A process of `__test__/workers/trust-worker.js` (the run-index trust specs): a `Worker` of
// that script, with the run index on unless `env` says otherwise, whose warnings the worker
// collects (`warnings`) instead of printing them.
import { Worker } from './worker';

export class Forked extends Worker {
  constructor(name: string, extra: NodeJS.ProcessEnv = {}) {
    const env = { ...process.env, ...extra };
    if (extra.PIW_RUN_INDEX === undefined) delete env.PIW_RUN_INDEX;
    super(name, env, { script: 'trust-worker.js', execArgv: ['--no-warnings'] });
  }
}
