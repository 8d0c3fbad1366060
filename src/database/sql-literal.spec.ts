import { escapeLiteral } from 'pg';
import { sqlLiteral } from './sql-literal.js';

describe('sqlLiteral', () => {
  it("writes pg's escapeLiteral answer, byte for byte", () => {
    const samples = [
      '',
      'plain text',
      "it's",
      "''",
      'back\\slash',
      "both ' and \\ here",
      '\\',
      "'",
      '{"a":"b\\"c","d":"it\'s"}',
      'é \u{1F600} \n\t',
    ];
    let seed = 7;
    const alphabet = ["'", '\\', 'a', ' ', 'é', '"', '\n'];
    for (let i = 0; i < 2000; i++) {
      let s = '';
      for (let n = i % 12; n > 0; n--) {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        s += alphabet[seed % alphabet.length];
      }
      samples.push(s);
    }
    for (const s of samples) expect(sqlLiteral(s)).toBe(escapeLiteral(s));
  });
});
