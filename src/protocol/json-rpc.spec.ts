import { classifyMessage, InvalidMessageError } from './json-rpc.js';

describe('classifyMessage', () => {
  it('tells requests, notifications and responses apart', () => {
    expect(classifyMessage({ jsonrpc: '2.0', id: 1, method: 'ping' }).kind).toBe('request');
    expect(classifyMessage({ jsonrpc: '2.0', id: 'a', method: 'x', params: {} }).kind).toBe('request');
    expect(classifyMessage({ jsonrpc: '2.0', method: 'notifications/initialized' }).kind).toBe(
      'notification',
    );
    expect(classifyMessage({ jsonrpc: '2.0', id: 'srv-1', result: {} }).kind).toBe('response');
    expect(classifyMessage({ jsonrpc: '2.0', id: 2, error: { code: -1, message: 'x' } }).kind).toBe(
      'response',
    );
  });

  it.each([
    [null, null],
    [5, null],
    ['text', null],
    [{ jsonrpc: '1.0', id: 3, method: 'ping' }, 3],
    [{ jsonrpc: '2.0', id: 4, method: '' }, 4],
    [{ jsonrpc: '2.0', id: 5, method: 7 }, 5],
    [{ jsonrpc: '2.0', id: 6, method: 'x', params: [1, 2] }, 6],
    [{ jsonrpc: '2.0', id: { a: 1 }, method: 'x' }, null],
    [{ jsonrpc: '2.0', id: 8 }, 8],
    [{ jsonrpc: '2.0', id: 9, result: 'nope' }, 9],
    [{ jsonrpc: '2.0', result: {} }, null],
    [{ jsonrpc: '2.0', id: 10, error: { code: 7000000.5, message: 'x' } }, 10],
    [{ jsonrpc: '2.0', id: 11, error: { code: '-32000', message: 'x' } }, 11],
    [{ jsonrpc: '2.0', id: 12, error: { code: 2 ** 60, message: 'x' } }, 12],
    [{ jsonrpc: '2.0', id: 13, error: { code: -1, message: { text: 'x' } } }, 13],
    [{ jsonrpc: '2.0', id: 14, error: { code: -1 } }, 14],
  ])('refuses %j, keeping the id %j when readable', (body, id) => {
    let caught: unknown;
    try {
      classifyMessage(body);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(InvalidMessageError);
    expect((caught as InvalidMessageError).id).toBe(id);
    expect((caught as Error).message).toMatch(/^Invalid Request/);
  });
});
