import { SessionsService } from './sessions.service.js';

describe('session ids', () => {
  it('are 32 url-safe characters, distinct, and never start with - (an option, to a command line)', () => {
    // Without the redraw, 1 id in 64 starts with - (about 310 of these).
    const ids = new Set(Array.from({ length: 20_000 }, () => SessionsService.newId()));
    expect(ids.size).toBe(20_000);
    const shape = /^[A-Za-z0-9_][A-Za-z0-9_-]{31}$/;
    expect([...ids].filter((id) => !shape.test(id))).toEqual([]);
  });
});
