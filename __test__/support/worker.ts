// A worker process (`__test__/workers/xproc-worker.js`, or another script of that folder with the
// same protocol, such as trust-worker.js), forked with `serialization: 'advanced'` and driven
// over IPC: `call(op, payload)` sends `{ id, op, ...payload }` and resolves with the answer to
// that id (the worker answers one message at a time, in order). If the process exits, every
// pending and later call rejects with how it ended; `gone` resolves then.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const WORKERS = path.join(__dirname, '..', 'workers');

export type WorkerOptions = {
  /** The script in `__test__/workers/` (default `xproc-worker.js`). */
  script?: string;
  /** Node's options for the process (e.g. `--no-warnings` when the worker collects them). */
  execArgv?: string[];
};

export class Worker {
  readonly child: ChildProcess;
  /** Resolves once the process has exited. */
  readonly gone: Promise<void>;
  private next = 0;
  private readonly pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();
  private exited: string | undefined;

  constructor(
    readonly name: string,
    env: NodeJS.ProcessEnv,
    { script = 'xproc-worker.js', execArgv }: WorkerOptions = {},
  ) {
    this.child = fork(path.join(WORKERS, script), [], {
      env,
      execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: any) => {
      const waiting = this.pending.get(message.id);
      if (waiting === undefined) return;
      this.pending.delete(message.id);
      if (message.error !== undefined) waiting.reject(new Error(`${this.name}: ${message.error.message}\n${message.error.stack}`));
      else waiting.resolve(message.value);
    });
    this.gone = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exited = `${this.name} exited (${code ?? signal})`;
        for (const waiting of this.pending.values()) waiting.reject(new Error(this.exited));
        this.pending.clear();
        resolve();
      });
    });
  }

  call(op: string, payload: Record<string, unknown> = {}): Promise<any> {
    if (this.exited !== undefined) return Promise.reject(new Error(this.exited));
    const id = (this.next += 1);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.child.send({ id, op, ...payload });
    });
  }

  /** SIGKILL, as a crash or an OOM kill would; resolves once the process is gone. */
  kill(): Promise<void> {
    if (this.exited === undefined) this.child.kill('SIGKILL');
    return this.gone;
  }

  /** Closes the worker's connection, then waits for the process to end (at once if it died). */
  async close(): Promise<void> {
    if (this.exited === undefined) await this.call('close');
    await this.gone;
  }
}
