import { SnakeNamingStrategy } from './snake-naming.strategy.js';
import { redactDatabaseUrl } from './redact-url.js';

describe('SnakeNamingStrategy', () => {
  const s = new SnakeNamingStrategy();
  it('snake-cases table and column names', () => {
    expect(s.tableName('ServiceInstance')).toBe('service_instance');
    expect(s.tableName('X', 'custom')).toBe('custom');
    expect(s.columnName('heartbeatAt', undefined, [])).toBe('heartbeat_at');
    expect(s.columnName('httpURLValue', undefined, [])).toBe('http_url_value');
    expect(s.columnName('x', 'explicit_name', [])).toBe('explicit_name');
  });
});

describe('redactDatabaseUrl', () => {
  it('hides the password', () => {
    expect(redactDatabaseUrl('postgres://u:secret@h:5432/db')).toBe('postgres://u:***@h:5432/db');
    expect(redactDatabaseUrl('postgres://u@h/db')).toBe('postgres://u@h/db');
    expect(redactDatabaseUrl('::')).toBe('(unparsable DATABASE_URL)');
  });
});
