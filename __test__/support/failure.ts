// The error a call throws, as { name, message, code? }: what the specs compare against the
// reference's errors. Fails the test when the call does not throw.
export function failure(run: () => unknown): { name: string; message: string; code?: string } {
  try {
    run();
  } catch (error) {
    const e = error as Error & { code?: string };
    return { name: e.constructor.name, message: e.message, ...(e.code === undefined ? {} : { code: e.code }) };
  }
  throw new Error('expected a throw');
}
