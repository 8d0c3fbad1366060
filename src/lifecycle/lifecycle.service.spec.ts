import { LifecycleService } from './lifecycle.service.js';

describe('LifecycleService', () => {
  it('waits for in-flight requests to finish before reporting idle', async () => {
    const l = new LifecycleService();
    l.requestStarted();
    l.requestStarted();
    const idle = l.waitForIdle(5000);
    l.requestFinished();
    setTimeout(() => l.requestFinished(), 20);
    await expect(idle).resolves.toBe(true);
  });

  it('gives up after the grace period when requests keep running', async () => {
    const l = new LifecycleService();
    l.requestStarted();
    const t0 = Date.now();
    await expect(l.waitForIdle(50)).resolves.toBe(false);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);
  });

  it('tells announcement listeners once, at the announcement (before the drain) or at once when late', () => {
    const l = new LifecycleService();
    const heard: string[] = [];
    l.onDrainAnnounced(() => heard.push('early'));
    const off = l.onDrainAnnounced(() => heard.push('unsubscribed'));
    off();
    l.announceDrain();
    expect(l.draining).toBe(false);
    l.announceDrain();
    l.beginDrain();
    l.onDrainAnnounced(() => heard.push('late'));
    expect(heard).toEqual(['early', 'late']);
  });

  it('tells drain listeners once, including late subscribers', () => {
    const l = new LifecycleService();
    let early = 0;
    let late = 0;
    l.onDrain(() => early++);
    expect(l.draining).toBe(false);
    l.beginDrain();
    l.beginDrain();
    l.onDrain(() => late++);
    expect(l.draining).toBe(true);
    expect(early).toBe(1);
    expect(late).toBe(1);
  });

  it('announces a drain without draining: readiness off first, refusals and drain listeners later', () => {
    const l = new LifecycleService();
    let told = 0;
    l.onDrain(() => told++);
    l.announceDrain();
    expect([l.drainAnnounced, l.draining, told]).toEqual([true, false, 0]);
    l.beginDrain();
    expect([l.drainAnnounced, l.draining, told]).toEqual([true, true, 1]);
    const direct = new LifecycleService();
    direct.beginDrain();
    expect([direct.drainAnnounced, direct.draining]).toEqual([true, true]);
  });
});
