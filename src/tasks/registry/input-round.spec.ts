import { checkInputRound } from './input-round.js';
import { inputKeyFor } from '../task.types.js';

const limits = { maxRounds: 3, maxKeys: 2, maxStateBytes: 20 };
const ask = { method: 'elicitation/create', params: { message: 'Name?' } };

describe('input round limits', () => {
  it('accepts a round within every limit', () => {
    expect(checkInputRound({ inputRounds: 2 }, { a: ask, b: ask }, { s: 1 }, limits)).toBeNull();
  });

  it('names the limit each broken round breaks', () => {
    expect(checkInputRound({ inputRounds: 3 }, { a: ask }, null, limits)).toMatch(
      /TASK_MAX_INPUT_ROUNDS \(3\)/,
    );
    expect(checkInputRound({ inputRounds: 0 }, { a: ask, b: ask, c: ask }, null, limits)).toMatch(
      /TASK_MAX_INPUT_KEYS \(2\)/,
    );
    expect(checkInputRound({ inputRounds: 0 }, { a: ask }, { blob: 'x'.repeat(30) }, limits)).toMatch(
      /TASK_MAX_HANDLER_STATE_BYTES \(20\)/,
    );
  });

  it('refuses empty rounds, bad keys and requests without a method', () => {
    expect(checkInputRound({ inputRounds: 0 }, {}, null, limits)).toMatch(/no input requests/);
    expect(checkInputRound({ inputRounds: 0 }, { 'a b': ask }, null, limits)).toMatch(/bad request key/);
    expect(checkInputRound({ inputRounds: 0 }, { a: { method: '' } }, null, limits)).toMatch(/has no method/);
  });

  it('mints wire keys that differ across rounds for the same local key', () => {
    expect(inputKeyFor(1, 'name')).toBe('r1.name');
    expect(inputKeyFor(2, 'name')).not.toBe(inputKeyFor(1, 'name'));
  });
});
