// A forked worker process answering one message at a time (`__test__/workers/trust-worker.js`),
// killed with SIGKILL when a spec says so or when it ends.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const WORKER = path.join(__dirname, '..', 'workers', 'trust-worker.js');

export class Forked {
  readonly child: ChildProcess;
  private next = 0;
  private readonly pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();
  private exited: string | undefined;
  readonly gone: Promise<void>;

  constructor(
    readonly name: string,
    extra: NodeJS.ProcessEnv = {},
  ) {
    const env = { ...process.env, ...extra };
    if (extra.PIW_RUN_INDEX === undefined) delete env.PIW_RUN_INDEX;
    // Warnings are collected by the worker (`warnings`), not printed.
    this.child = fork(WORKER, [], { env, execArgv: ['--no-warnings'], serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
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

  /** Closes the connection, then waits for the process to end (at once if it died). */
  async close(): Promise<void> {
    if (this.exited === undefined) await this.call('close');
    await this.gone;
  }
}
