// The frozen clock of a trace, on Jest's modern fake timers with only `Date` faked: timers,
// ticks, microtasks and performance stay real, so nothing else in the process changes pace.

import { Clock } from './replayer';

const REAL_APIS = [
  'hrtime',
  'nextTick',
  'performance',
  'queueMicrotask',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'requestIdleCallback',
  'cancelIdleCallback',
  'setImmediate',
  'clearImmediate',
  'setInterval',
  'clearInterval',
  'setTimeout',
  'clearTimeout',
] as const;

export const jestClock: Clock = {
  freeze(now) {
    jest.useFakeTimers({ now, doNotFake: [...REAL_APIS] });
  },
  set(now) {
    jest.setSystemTime(now);
  },
  release() {
    jest.useRealTimers();
  },
};

/** Fails loudly unless the process runs in UTC (the traces were recorded with TZ=UTC). */
export function assertUtc(): void {
  if (new Date(0).getTimezoneOffset() !== 0 || new Date(Date.UTC(2026, 6, 1)).getTimezoneOffset() !== 0) {
    throw new Error(`These tests must run with TZ=UTC (TZ=${process.env.TZ ?? '<unset>'})`);
  }
}
