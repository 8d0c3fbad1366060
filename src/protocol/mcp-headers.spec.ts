import { decodeHeaderValue, nameFieldFor } from './mcp-headers.js';

describe('decodeHeaderValue', () => {
  it('trims plain values and decodes the base64 form', () => {
    expect(decodeHeaderValue('  tools/call ', 'Mcp-Method')).toBe('tools/call');
    expect(decodeHeaderValue(`=?base64?${Buffer.from('héllo wörld').toString('base64')}?=`, 'Mcp-Name')).toBe(
      'héllo wörld',
    );
  });

  it('refuses malformed base64 as a header mismatch', () => {
    expect(() => decodeHeaderValue('=?base64?abc?=', 'Mcp-Name')).toThrow(/invalid base64/);
    expect(() => decodeHeaderValue('=?base64?ab$c?=', 'Mcp-Name')).toThrow(/invalid base64/);
  });

  it('maps methods to the body field Mcp-Name mirrors', () => {
    expect(nameFieldFor('tools/call')).toBe('name');
    expect(nameFieldFor('resources/read')).toBe('uri');
    expect(nameFieldFor('tasks/update')).toBe('taskId');
    expect(nameFieldFor('tools/list')).toBeUndefined();
  });
});
