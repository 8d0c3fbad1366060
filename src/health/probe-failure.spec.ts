import { probeFailureReason } from './probe-failure.js';

function pgError(code: string, message = 'driver text naming db.internal and role mcp'): Error {
  return Object.assign(new Error(message), { code });
}

describe('probeFailureReason', () => {
  it('calls server-side cancellations a timeout', () => {
    expect(probeFailureReason(pgError('57014'))).toBe('timeout');
    expect(probeFailureReason(pgError('55P03'))).toBe('timeout');
  });

  it('calls connection trouble unavailable, also when wrapped by TypeORM', () => {
    expect(probeFailureReason(pgError('ECONNREFUSED'))).toBe('unavailable');
    expect(probeFailureReason(pgError('08006'))).toBe('unavailable');
    expect(probeFailureReason(pgError('57P01'))).toBe('unavailable');
    expect(probeFailureReason(pgError('3D000'))).toBe('unavailable');
    expect(probeFailureReason(pgError('53300'))).toBe('unavailable');
    expect(probeFailureReason({ driverError: pgError('57P03') })).toBe('unavailable');
    expect(probeFailureReason(new Error('Connection terminated unexpectedly'))).toBe('unavailable');
  });

  it('calls anything else failed, never echoing the message', () => {
    expect(probeFailureReason(pgError('42P01'))).toBe('failed');
    expect(probeFailureReason(new Error('secret detail'))).toBe('failed');
    expect(probeFailureReason('boom')).toBe('failed');
  });
});
