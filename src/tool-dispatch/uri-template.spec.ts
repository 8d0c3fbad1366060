import { UriTemplate } from './uri-template.js';

describe('UriTemplate', () => {
  it('matches level-1 variables, decodes them and refuses values spanning a slash', () => {
    const t = new UriTemplate('notes://{folder}/items/{id}');
    expect(t.variables).toEqual(['folder', 'id']);
    expect(t.match('notes://team/items/a%2Fb')).toEqual({ folder: 'team', id: 'a/b' });
    expect(t.match('notes://team/more/items/1')).toBeUndefined();
    expect(t.match('notes://team/items/')).toBeUndefined();
    expect(t.match('notes://team/items/%E0%A4%A')).toBeUndefined();
  });

  it('escapes literal regex characters', () => {
    expect(new UriTemplate('a+b://x.{id}').match('a+b://x.1')).toEqual({ id: '1' });
    expect(new UriTemplate('a+b://x.{id}').match('aab://xx1')).toBeUndefined();
  });

  it('refuses operators, repeated variables, unbalanced braces and templates without variables', () => {
    expect(() => new UriTemplate('x://{+path}')).toThrow(/not a level-1 variable/);
    expect(() => new UriTemplate('x://{a}/{a}')).toThrow(/repeats/);
    expect(() => new UriTemplate('x://{a')).toThrow(/unclosed/);
    expect(() => new UriTemplate('x://a}')).toThrow(/unbalanced/);
    expect(() => new UriTemplate('x://plain')).toThrow(/no \{variable\}/);
  });
});
