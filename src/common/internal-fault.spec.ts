import { isInfrastructureFault } from './internal-fault.js';

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
