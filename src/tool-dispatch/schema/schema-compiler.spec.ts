import 'reflect-metadata';
import { Type } from 'class-transformer';
import { IsArray, IsEmail, IsInt, IsOptional, IsString, Max, Min, ValidateNested } from 'class-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { SchemaCompiler } from './schema-compiler.js';
import { buildDtoSchema } from './dto-schema.builder.js';

class Item {
  @IsString()
  sku: string;

  @IsInt()
  @Min(1)
  qty: number;
}

class Order {
  @IsInt()
  @Min(1)
  @Max(100)
  count: number;

  @IsEmail()
  email: string;

  @IsOptional()
  @IsString()
  note?: string = 'none';

  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => Item)
  items: Item[];
}

const RAW_2020 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { city: { type: 'string' } } } },
  properties: {
    count: { type: 'integer', minimum: 1 },
    address: { $ref: '#/$defs/address' },
    contact: { type: 'string', enum: ['phone', 'email'] },
  },
  required: ['count'],
  if: { properties: { contact: { const: 'phone' } }, required: ['contact'] },
  then: { required: ['address'] },
  additionalProperties: false,
};

describe('SchemaCompiler', () => {
  const compiler = new SchemaCompiler();

  describe('DTO inputs', () => {
    const validator = compiler.compile(Order);

    it('derives a schema that ajv accepts as valid JSON Schema 2020-12', () => {
      expect(() => new Ajv2020({ strict: false }).compile(buildDtoSchema(Order))).not.toThrow();
      expect(validator.schema).toEqual(buildDtoSchema(Order));
    });

    it('hands back a DTO instance with nested instances and defaults applied', async () => {
      const outcome = await validator.validate(
        { count: 2, email: 'a@b.example', items: [{ sku: 'x', qty: 1 }] },
        'arguments',
      );
      expect(outcome.ok).toBe(true);
      if (!outcome.ok) return;
      expect(outcome.value).toBeInstanceOf(Order);
      expect((outcome.value as Order).items[0]).toBeInstanceOf(Item);
      expect((outcome.value as Order).note).toBe('none');
    });

    it('names every bad field with its full path, including missing, unknown and nested ones', async () => {
      const outcome = await validator.validate(
        { count: 2.5, email: 'nope', items: [{ sku: 'x', qty: 0 }, { qty: 1 }], colour: 'red' },
        'arguments',
      );
      expect(outcome.ok).toBe(false);
      if (outcome.ok) return;
      expect(outcome.problems).toEqual(
        expect.arrayContaining([
          'arguments.count must be an integer number',
          'arguments.email must be an email',
          'arguments.colour is not allowed (unknown property)',
          'arguments.items[0].qty must not be less than 1',
          'arguments.items[1].sku is required',
        ]),
      );
    });

    it('reports a missing required field as required, not as a type error', async () => {
      const outcome = await validator.validate({ email: 'a@b.example', items: [] }, 'arguments');
      expect(outcome).toEqual({ ok: false, problems: ['arguments.count is required'] });
    });

    it('refuses non-object arguments', async () => {
      expect(await validator.validate([1, 2], 'arguments')).toEqual({
        ok: false,
        problems: ['arguments must be an object'],
      });
    });
  });

  describe('raw JSON Schema inputs', () => {
    it('keeps the schema exactly as written (deep equal, not the same mutable object)', () => {
      const validator = compiler.compile(RAW_2020);
      expect(validator.schema).toEqual(RAW_2020);
      expect(validator.schema).not.toBe(RAW_2020);
      expect(Object.isFrozen(validator.schema)).toBe(true);
    });

    it('validates with 2020-12 semantics and names each bad field', async () => {
      const validator = compiler.compile(RAW_2020);
      expect(await validator.validate({ count: 1, contact: 'email' }, 'arguments')).toEqual({
        ok: true,
        value: { count: 1, contact: 'email' },
      });
      const bad = await validator.validate({ count: 'x', contact: 'phone', extra: 1 }, 'arguments');
      expect(bad.ok).toBe(false);
      if (bad.ok) return;
      expect(bad.problems).toEqual(
        expect.arrayContaining([
          'arguments.count must be an integer',
          'arguments.extra is not allowed (unknown property)',
          'arguments.address is required',
        ]),
      );
      const missing = await validator.validate({}, 'arguments');
      expect(missing).toEqual({ ok: false, problems: ['arguments.count is required'] });
    });

    it('accepts draft-07 schemas and validates formats', async () => {
      const validator = compiler.compile({
        $schema: 'http://json-schema.org/draft-07/schema#',
        type: 'object',
        properties: { mail: { type: 'string', format: 'email' } },
      });
      const outcome = await validator.validate({ mail: 'not-an-email' }, 'arguments');
      expect(outcome).toEqual({ ok: false, problems: ['arguments.mail must match format "email"'] });
    });

    it('refuses schemas ajv cannot compile, non-object roots and unknown dialects', () => {
      expect(() => compiler.compile({ type: 'object', properties: { a: { type: 'strnig' } } })).toThrow(
        /invalid JSON Schema/,
      );
      expect(() => compiler.compile({ type: 'string' })).toThrow(/"type": "object"/);
      expect(() =>
        compiler.compile({ $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }),
      ).toThrow(/unsupported \$schema/);
    });

    it('compiles the same $id twice in two compilers (one per registry) without clashing', () => {
      const schema = { $id: 'https://example.test/s', type: 'object' };
      expect(() => new SchemaCompiler().compile(schema)).not.toThrow();
      expect(() => new SchemaCompiler().compile(schema)).not.toThrow();
    });
  });
});
