import 'reflect-metadata';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  Equals,
  IsArray,
  IsBoolean,
  IsDateString,
  IsEmail,
  IsEnum,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsNumber,
  IsOptional,
  IsPositive,
  IsString,
  IsUrl,
  IsUUID,
  Length,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateNested,
} from 'class-validator';
import { Describe } from '../decorators/describe.decorator.js';
import { buildDtoSchema } from './dto-schema.builder.js';

enum Colour {
  Red = 'red',
  Green = 'green',
}

enum Level {
  Low = 1,
  High = 2,
}

class Address {
  @IsString()
  @Describe('Street and number')
  street: string;

  @IsOptional()
  @Matches(/^\d{5}$/)
  zip?: string;
}

class Everything {
  @IsString()
  @MinLength(2)
  @MaxLength(40)
  @Describe('Who to greet', { title: 'Name', examples: ['Ada'] })
  name: string;

  @IsInt()
  @Min(1)
  @Max(10)
  count = 3;

  @IsNumber()
  @IsPositive()
  ratio: number;

  @IsBoolean()
  @IsOptional()
  loud?: boolean;

  @IsIn(['a', 'b'])
  letter: string;

  @IsEnum(Colour)
  colour: Colour;

  @IsEnum(Level)
  level: Level;

  @Equals('v1')
  version: string;

  @Length(3, 8)
  code: string;

  @IsNotEmpty()
  @IsString()
  nonEmpty: string;

  @IsEmail()
  email: string;

  @IsUrl()
  homepage: string;

  @IsUUID()
  id: string;

  @IsDateString()
  when: string;

  @IsArray()
  @IsString({ each: true })
  @MinLength(1, { each: true })
  @ArrayMinSize(1)
  @ArrayMaxSize(5)
  @ArrayUnique()
  tags: string[];

  @ValidateNested()
  @Type(() => Address)
  address: Address;

  @IsOptional()
  @IsArray()
  @ValidateNested({ each: true })
  @Type(() => Address)
  others?: Address[];
}

describe('buildDtoSchema', () => {
  const schema = buildDtoSchema(Everything);
  const props = schema.properties as Record<string, Record<string, unknown>>;

  it('makes a closed object schema whose required list leaves out @IsOptional properties', () => {
    expect(schema.type).toBe('object');
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(
      expect.arrayContaining(['name', 'count', 'ratio', 'letter', 'tags', 'address', 'email']),
    );
    expect(schema.required).not.toContain('loud');
    expect(schema.required).not.toContain('others');
  });

  it('maps string decorators with lengths, descriptions, title and examples', () => {
    expect(props.name).toEqual({
      type: 'string',
      minLength: 2,
      maxLength: 40,
      title: 'Name',
      description: 'Who to greet',
      examples: ['Ada'],
    });
    expect(props.code).toEqual({ minLength: 3, maxLength: 8, type: 'string' });
    expect(props.nonEmpty).toEqual({ type: 'string', minLength: 1 });
  });

  it('maps numbers: IsInt with Min/Max and a default from the initializer, IsNumber with IsPositive', () => {
    expect(props.count).toEqual({ type: 'integer', minimum: 1, maximum: 10, default: 3 });
    expect(props.ratio).toEqual({ type: 'number', exclusiveMinimum: 0 });
    expect(props.loud).toEqual({ type: 'boolean' });
  });

  it('maps IsIn, IsEnum (string and numeric enums) and Equals', () => {
    expect(props.letter).toEqual({ enum: ['a', 'b'], type: 'string' });
    expect(props.colour).toEqual({ enum: ['red', 'green'], type: 'string' });
    expect(props.level).toEqual({ enum: [1, 2], type: 'number' });
    expect(props.version).toEqual({ const: 'v1', type: 'string' });
  });

  it('maps string formats', () => {
    expect(props.email).toEqual({ type: 'string', format: 'email' });
    expect(props.homepage).toEqual({ type: 'string', format: 'uri' });
    expect(props.id).toEqual({ type: 'string', format: 'uuid' });
    expect(props.when).toEqual({ type: 'string', format: 'date-time' });
  });

  it('maps arrays: item constraints from each:true, size and uniqueness on the array', () => {
    expect(props.tags).toEqual({
      type: 'array',
      items: { type: 'string', minLength: 1 },
      minItems: 1,
      maxItems: 5,
      uniqueItems: true,
    });
  });

  it('inlines nested DTOs given by ValidateNested + Type, single and in arrays', () => {
    const address = {
      type: 'object',
      properties: {
        street: { type: 'string', description: 'Street and number' },
        zip: { type: 'string', pattern: '^\\d{5}$' },
      },
      required: ['street'],
      additionalProperties: false,
    };
    expect(props.address).toEqual(address);
    expect(props.others).toEqual({ type: 'array', items: address });
  });

  it('refuses a DTO that nests itself', () => {
    class Node {
      @ValidateNested()
      @Type(() => Node)
      child: Node;
    }
    expect(() => buildDtoSchema(Node)).toThrow(/Node refers to itself/);
  });
});
