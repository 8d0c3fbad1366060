import { isDatabaseUnavailable, isInfrastructureFault } from './internal-fault.js';

class TypeORMError extends Error {}
class QueryFailedError extends TypeORMError {}
class EntityNotFoundError extends TypeORMError {}

describe('isInfrastructureFault', () => {
  it('recognises pg, TypeORM, socket and pool errors by shape', () => {
    const pgError = Object.assign(new Error('relation "secret_table" does not exist'), {
      code: '42P01',
      severity: 'ERROR',
    });
    expect(isInfrastructureFault(pgError)).toBe(true);
    expect(isInfrastructureFault(Object.assign(new QueryFailedError('q'), { driverError: pgError }))).toBe(
      true,
    );
    expect(isInfrastructureFault(new EntityNotFoundError('no row'))).toBe(true);
    expect(
      isInfrastructureFault(
        Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { syscall: 'connect' }),
      ),
    ).toBe(true);
    expect(isInfrastructureFault(new Error('Connection terminated unexpectedly'))).toBe(true);
  });

  it('leaves errors a tool meant for its caller alone', () => {
    expect(isInfrastructureFault(new Error('the file is too large'))).toBe(false);
    expect(isInfrastructureFault(Object.assign(new Error('bad'), { code: 'E_TOO_BIG' }))).toBe(false);
    expect(isInfrastructureFault('a string')).toBe(false);
    expect(isInfrastructureFault(null)).toBe(false);
  });
});

describe('isDatabaseUnavailable', () => {
  it('tells an unreachable database from a failing statement', () => {
    const shutdown = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
      severity: 'FATAL',
    });
    const tooMany = Object.assign(new Error('sorry, too many clients already'), {
      code: '53300',
      severity: 'FATAL',
    });
    const lostLink = Object.assign(new Error('connection failure'), { code: '08006', severity: 'FATAL' });
    expect(isDatabaseUnavailable(shutdown)).toBe(true);
    expect(isDatabaseUnavailable(tooMany)).toBe(true);
    expect(isDatabaseUnavailable(lostLink)).toBe(true);
    // A hot standby the address still leads to after a failover refuses every write.
    const readOnly = Object.assign(new Error('cannot execute INSERT in a read-only transaction'), {
      code: '25006',
      severity: 'ERROR',
    });
    expect(isDatabaseUnavailable(Object.assign(new QueryFailedError('q'), { driverError: readOnly }))).toBe(
      true,
    );
    expect(isDatabaseUnavailable(Object.assign(new QueryFailedError('q'), { driverError: shutdown }))).toBe(
      true,
    );
    expect(
      isDatabaseUnavailable(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' })),
    ).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);

    const missingTable = Object.assign(new Error('relation "t" does not exist'), {
      code: '42P01',
      severity: 'ERROR',
    });
    const lockTimeout = Object.assign(new Error('canceling statement due to lock timeout'), {
      code: '55P03',
      severity: 'ERROR',
    });
    expect(isDatabaseUnavailable(missingTable)).toBe(false);
    expect(isDatabaseUnavailable(lockTimeout)).toBe(false);
    expect(isDatabaseUnavailable(new Error('the file is too large'))).toBe(false);
    expect(isDatabaseUnavailable(null)).toBe(false);
  });
});
