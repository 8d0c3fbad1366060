import { fairnessKeyOf } from './fairness.js';

describe('fairnessKeyOf (TASK_FAIR_SHARE)', () => {
  const alice = { id: 'proxy:alice', tenant: 'acme' };
  const bob = { id: 'proxy:bob' };

  it('gives every principal a share of its own by default', () => {
    expect(fairnessKeyOf('principal', 'proxy:alice', alice)).toBe('proxy:alice');
    expect(fairnessKeyOf('principal', 'proxy:bob', bob)).toBe('proxy:bob');
  });

  it('puts the principals of one tenant in one share, and a principal without one in its own', () => {
    expect(fairnessKeyOf('tenant', 'proxy:alice', alice)).toBe('tenant:acme');
    expect(fairnessKeyOf('tenant', 'proxy:carol', { tenant: 'acme' })).toBe('tenant:acme');
    expect(fairnessKeyOf('tenant', 'proxy:bob', bob)).toBe('proxy:bob');
    // A tenant named like a principal id never shares that principal's share.
    expect(fairnessKeyOf('tenant', 'proxy:x', { tenant: 'proxy:bob' })).not.toBe('proxy:bob');
  });

  it('is one share for everyone when off (first come, first served)', () => {
    expect(fairnessKeyOf('off', 'proxy:alice', alice)).toBe('');
    expect(fairnessKeyOf('off', 'proxy:bob', null)).toBe('');
  });
});
