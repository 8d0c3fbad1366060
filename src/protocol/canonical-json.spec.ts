import { canonicalJson, digest } from './canonical-json.js';

/** The definition canonicalJson must keep to, written the obvious way (the digests of stored tasks depend on it). */
function reference(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(reference).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${reference(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** A pseudo-random JSON-ish value (seeded, so a failure is reproducible), with undefined members too. */
function randomValue(next: () => number, depth: number): unknown {
  const pick = Math.floor(next() * (depth > 3 ? 6 : 8));
  const keys = ['b', 'a', 'Z', 'é', '10', '2', 'a"b', '', '\u{1F600}', 'aa'];
  switch (pick) {
    case 0:
      return null;
    case 1:
      return next() < 0.5;
    case 2:
      return Math.floor(next() * 2000) - 1000 + (next() < 0.3 ? 0.5 : 0);
    case 3:
      return keys[Math.floor(next() * keys.length)] + '\n\\"';
    case 4:
      return undefined;
    case 5:
      return '';
    case 6:
      return Array.from({ length: Math.floor(next() * 4) }, () => randomValue(next, depth + 1));
    default: {
      const out: Record<string, unknown> = {};
      for (let i = Math.floor(next() * 5); i > 0; i--) {
        out[keys[Math.floor(next() * keys.length)]] = randomValue(next, depth + 1);
      }
      return out;
    }
  }
}

describe('canonicalJson', () => {
  it('sorts keys at every level and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: undefined, x: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,{"x":2,"z":1}]},"b":1}',
    );
    expect(canonicalJson([undefined, 1])).toBe('[null,1]');
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('is the reference definition, byte for byte, on 5000 random values', () => {
    let seed = 42;
    const next = (): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let i = 0; i < 5000; i++) {
      const value = randomValue(next, 0);
      expect(canonicalJson(value)).toBe(reference(value));
    }
  });

  it('digests equal values equally, whatever their key order', () => {
    expect(digest({ a: 1, b: [1, 2] })).toBe(digest({ b: [1, 2], a: 1 }));
  });
});
