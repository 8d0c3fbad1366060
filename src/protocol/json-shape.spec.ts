import { checkJsonShape, type JsonShapeLimits } from './json-shape.js';

const LIMITS: JsonShapeLimits = { maxDepth: 4, maxObjectKeys: 3, maxNodes: 20 };
const check = (text: string, limits = LIMITS) => checkJsonShape(Buffer.from(text, 'utf8'), limits);

describe('checkJsonShape', () => {
  it('passes JSON within every limit, whatever its strings contain', () => {
    expect(check('{"a":[1,2,{"b":"x"}],"c":null}')).toBeUndefined();
    expect(check('{"a":"[[[[[[{{{{{\\"::::,,,,"}')).toBeUndefined();
    expect(check('[]')).toBeUndefined();
    expect(check('"é{"')).toBeUndefined();
  });

  it('refuses nesting one level past the depth limit, and not at it', () => {
    expect(check('[[[[1]]]]')).toBeUndefined();
    expect(check('[[[[[1]]]]]')).toMatchObject({ limit: 'depth', max: 4, setting: 'JSON_MAX_DEPTH' });
    expect(check('{"a":{"a":{"a":{"a":{}}}}}')?.limit).toBe('depth');
  });

  it('counts keys per object, not per message', () => {
    expect(check('{"a":1,"b":2,"c":{"a":1,"b":2,"c":3}}')).toBeUndefined();
    expect(check('{"a":1,"b":2,"c":3,"d":4}')).toMatchObject({ limit: 'object_keys', max: 3 });
    expect(check('[{"a":{"a":1,"b":2,"c":3,"d":4}}]')?.limit).toBe('object_keys');
  });

  it('counts every value, containers included', () => {
    // 1 array + 19 numbers = 20 values: at the limit; one more is over it.
    const at = `[${Array(19).fill(1).join(',')}]`;
    expect(check(at)).toBeUndefined();
    expect(check(`[${Array(20).fill(1).join(',')}]`)).toMatchObject({ limit: 'nodes', max: 20 });
  });

  it('finds the id and kind of the message even after the limit was broken', () => {
    const deep = '['.repeat(10) + ']'.repeat(10);
    expect(check(`{"jsonrpc":"2.0","id":7,"method":"x","params":{"a":${deep}}}`)).toMatchObject({
      id: 7,
      isResponse: false,
    });
    expect(check(`{"jsonrpc":"2.0","params":{"a":${deep}},"id":"r-1","method":"x"}`)?.id).toBe('r-1');
    expect(check(`{"jsonrpc":"2.0","id":"srv-1","error":{"code":1,"data":${deep}}}`)).toMatchObject({
      id: 'srv-1',
      isResponse: true,
    });
    expect(check(`{"id":{"a":1},"x":${deep}}`)?.id).toBeNull();
    expect(check(deep)).toMatchObject({ isObject: false, code: -32600 });
    expect(check(`{"id":1,"x":${deep}}`)).toMatchObject({ isObject: true, code: -32602 });
  });
});
