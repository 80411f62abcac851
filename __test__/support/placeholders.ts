// Placeholders (`$rand:N`, `$env:N`, `$hash:N`) as the conformance README defines them: the first
// occurrence met while walking the trace binds N to the value found there, later occurrences must
// be that value, and different numbers of one kind must be different values. `$DIR` is not a
// placeholder but a textual substitution, done before anything else.

export type PlaceholderKind = 'rand' | 'env' | 'hash';

const PLACEHOLDER = /\$(rand|env|hash):(\d+)/g;

/** What each kind may stand for (README table). */
export const PLACEHOLDER_PATTERNS: Record<PlaceholderKind, string> = {
  rand: '(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[A-Za-z0-9_-]{43})',
  env: '[0-9a-f]{40}',
  hash: '[0-9a-f]{64}',
};

type Segment = { literal: string } | { kind: PlaceholderKind; n: string };

const segmentCache = new Map<string, Segment[]>();

/** Splits a string into literal text and placeholders (cached: trace strings repeat a lot). */
export function segments(text: string): Segment[] {
  let cached = segmentCache.get(text);
  if (cached !== undefined) return cached;
  cached = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    const at = match.index ?? 0;
    if (at > last) cached.push({ literal: text.slice(last, at) });
    cached.push({ kind: match[1] as PlaceholderKind, n: match[2] });
    last = at + match[0].length;
  }
  if (last < text.length) cached.push({ literal: text.slice(last) });
  if (segmentCache.size > 50_000) segmentCache.clear();
  segmentCache.set(text, cached);
  return cached;
}

export function hasPlaceholder(text: string): boolean {
  return text.includes('$') && segments(text).some((segment) => !('literal' in segment));
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}

function label(kind: PlaceholderKind, n: string): string {
  return `$${kind}:${n}`;
}

export class Bindings {
  private readonly values = new Map<string, string>();
  private readonly owners = new Map<string, string>();

  constructor(private readonly dir: string = '') {}

  /** `$DIR` replaced textually by the trace's canonical temporary directory. */
  dirText(text: string): string {
    return this.dir === '' || !text.includes('$DIR') ? text : text.split('$DIR').join(this.dir);
  }

  get(kind: PlaceholderKind, n: string): string | undefined {
    return this.values.get(label(kind, n));
  }

  /** Everything bound so far, for failure messages. */
  snapshot(): Record<string, string> {
    return Object.fromEntries(this.values);
  }

  /**
   * The string an argument stands for: `$DIR` and every (already bound) placeholder replaced.
   * Throws when a placeholder is used before any result bound it — a harness/trace error.
   */
  substitute(text: string): string {
    const expanded = this.dirText(text);
    if (!expanded.includes('$')) return expanded;
    return segments(expanded)
      .map((segment) => {
        if ('literal' in segment) return segment.literal;
        const value = this.get(segment.kind, segment.n);
        if (value === undefined) {
          throw new Error(`${label(segment.kind, segment.n)} is used before a result bound it`);
        }
        return value;
      })
      .join('');
  }

  /**
   * Matches `actual` against the expected string (with `$DIR` and placeholders). On success the
   * placeholders met for the first time are bound and `null` is returned; otherwise the reason.
   */
  match(expectedText: string, actual: string): string | null {
    const expected = this.dirText(expectedText);
    if (!expected.includes('$') || !hasPlaceholder(expected)) {
      return expected === actual ? null : 'values differ';
    }
    const parts = segments(expected);
    const fresh = new Map<string, { kind: PlaceholderKind; n: string; group: string }>();
    let source = '^';
    for (const segment of parts) {
      if ('literal' in segment) {
        source += escapeRegExp(segment.literal);
        continue;
      }
      const key = label(segment.kind, segment.n);
      const bound = this.values.get(key);
      if (bound !== undefined) {
        source += escapeRegExp(bound);
        continue;
      }
      const known = fresh.get(key);
      if (known !== undefined) {
        source += `\\k<${known.group}>`;
        continue;
      }
      const group = `${segment.kind}_${segment.n}`;
      fresh.set(key, { kind: segment.kind, n: segment.n, group });
      source += `(?<${group}>${PLACEHOLDER_PATTERNS[segment.kind]})`;
    }
    const found = new RegExp(`${source}$`).exec(actual);
    if (found === null) {
      const unbound = [...fresh.keys()];
      return unbound.length === 0
        ? 'values differ'
        : `values differ (or not the shape of ${unbound.join(', ')})`;
    }
    const captured = new Map<string, string>();
    for (const [key, { group }] of fresh) {
      const value = found.groups?.[group] ?? '';
      const owner = this.owners.get(value);
      if (owner !== undefined && owner !== key) {
        return `${key} would bind ${value}, which is already ${owner}`;
      }
      for (const [otherKey, otherValue] of captured) {
        if (otherValue === value) return `${key} and ${otherKey} would bind the same value ${value}`;
      }
      captured.set(key, value);
    }
    for (const [key, value] of captured) {
      this.values.set(key, value);
      this.owners.set(value, key);
    }
    return null;
  }
}
