// A process of `__test__/workers/xproc-worker.js`, forked with `serialization: 'advanced'` and
// driven over IPC: `call(op, payload)` sends `{ id, op, ...payload }` and resolves with the
// answer to that id (the worker answers one message at a time, in order). If the process exits,
// every pending and later call rejects with how it ended.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';

const WORKER = path.join(__dirname, '..', 'workers', 'xproc-worker.js');

export class Worker {
  readonly child: ChildProcess;
  private next = 0;
  private readonly pending = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>();
  private exited: string | undefined;

  constructor(
    readonly name: string,
    env: NodeJS.ProcessEnv,
  ) {
    this.child = fork(WORKER, [], { env, serialization: 'advanced', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (message: any) => {
      const waiting = this.pending.get(message.id);
      if (waiting === undefined) return;
      this.pending.delete(message.id);
      if (message.error !== undefined) waiting.reject(new Error(`${this.name}: ${message.error.message}\n${message.error.stack}`));
      else waiting.resolve(message.value);
    });
    this.child.on('exit', (code, signal) => {
      this.exited = `${this.name} exited (${code ?? signal})`;
      for (const waiting of this.pending.values()) waiting.reject(new Error(this.exited));
      this.pending.clear();
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

  kill(): void {
    if (this.exited === undefined) this.child.kill('SIGKILL');
  }
}
