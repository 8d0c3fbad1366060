import {
  allowOnly,
  boolFlag,
  CliUsageError,
  intFlag,
  parseArgs,
  parseDuration,
  positional,
} from './cli-args.js';

describe('CLI argument parsing', () => {
  it('takes values only for declared flags, so a boolean flag never swallows the next word', () => {
    const p = parseArgs(['cancel', '--json', 'task-1', '--reason', 'stuck', '--tool=x'], ['reason', 'tool']);
    expect(p.words).toEqual(['cancel', 'task-1']);
    expect(boolFlag(p, 'json')).toBe(true);
    expect(p.flags.get('reason')).toBe('stuck');
    expect(p.flags.get('tool')).toBe('x');
    expect(positional(p, ['TASK_ID'])).toEqual(['task-1']);
  });

  it('refuses unknown options, missing values, short options and extra words', () => {
    expect(() => allowOnly(parseArgs(['list', '--ownr', 'a'], []), ['owner'])).toThrow(
      /unknown option --ownr/,
    );
    expect(() => parseArgs(['list', '--owner'], ['owner'])).toThrow(/--owner needs a value/);
    expect(() => parseArgs(['list', '--owner', '--json'], ['owner'])).toThrow(/--owner needs a value/);
    expect(() => parseArgs(['list', '-x'], [])).toThrow(CliUsageError);
    expect(() => positional(parseArgs(['show', 'a', 'b'], []), ['TASK_ID'])).toThrow(/unexpected argument b/);
    expect(() => boolFlag(parseArgs(['list', '--json=yes'], []), 'json')).toThrow(/takes no value/);
  });

  it('takes every word after -- as positional, so an id may start with -', () => {
    const p = parseArgs(['show', '--json', '--', '-Ab_c', '--json'], []);
    expect(p.words).toEqual(['show', '-Ab_c', '--json']);
    expect(boolFlag(p, 'json')).toBe(true);
    expect(positional(parseArgs(['cancel', '--', '-x'], []), ['TASK_ID'])).toEqual(['-x']);
    expect(() => parseArgs(['show', '-Ab_c'], [])).toThrow(/goes after --: show -- -Ab_c/);
  });

  it('reads bounded integers and durations', () => {
    expect(intFlag(parseArgs(['--limit', '20'], ['limit']), 'limit', 1, 100, 5)).toBe(20);
    expect(intFlag(parseArgs([], ['limit']), 'limit', 1, 100, 5)).toBe(5);
    expect(() => intFlag(parseArgs(['--limit', '101'], ['limit']), 'limit', 1, 100, 5)).toThrow(/1 to 100/);
    expect(() => intFlag(parseArgs(['--limit', '-1'], ['limit']), 'limit', 1, 100, 5)).toThrow(CliUsageError);
    expect(parseDuration('90s', 'x')).toBe(90_000);
    expect(parseDuration('15m', 'x')).toBe(900_000);
    expect(parseDuration('2h', 'x')).toBe(7_200_000);
    expect(parseDuration('7d', 'x')).toBe(604_800_000);
    expect(parseDuration('250ms', 'x')).toBe(250);
    expect(() => parseDuration('1.5h', '--older-than')).toThrow(/--older-than must be a duration/);
  });
});
