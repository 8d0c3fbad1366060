import 'reflect-metadata';
import { plainToInstance } from 'class-transformer';
import { getMetadataStorage, ValidationTypes } from 'class-validator';
import { getFieldDescription } from '../decorators/describe.decorator.js';
import type { JsonObject } from '../tool-context.js';
import type { DtoClass, JsonSchema } from '../tool-dispatch.types.js';

/**
 * Derives a JSON Schema (2020-12 vocabulary, no `$schema`) from a class-validator DTO so the schema in
 * `tools/list` can never drift from the validation that really runs. Covered decorators: IsString, IsInt,
 * IsNumber, IsBoolean, IsObject, IsArray, IsOptional, ValidateIf, IsDefined, IsIn, IsEnum, Equals, Min, Max,
 * IsPositive, IsNegative, IsDivisibleBy, MinLength, MaxLength, Length, IsNotEmpty, Matches, IsEmail, IsUrl, IsUUID,
 * IsDateString/IsISO8601, ArrayMinSize, ArrayMaxSize, ArrayNotEmpty, ArrayUnique, ValidateNested with @Type,
 * and `each: true` on any of them. Other decorators still validate but add nothing to the schema. Property
 * types without a type decorator fall back to the TypeScript design type. Every object gets
 * `additionalProperties: false` because dispatch refuses unknown properties.
 */
export function buildDtoSchema(cls: DtoClass): JsonSchema {
  return objectSchema(cls, []);
}

type Schema = JsonObject;
type ValidationMetadata = ReturnType<
  ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']
>[number];

const ARRAY_CHECKS = new Set(['isArray', 'arrayMinSize', 'arrayMaxSize', 'arrayNotEmpty', 'arrayUnique']);

const STRING_FORMATS: Record<string, string> = {
  isEmail: 'email',
  isUrl: 'uri',
  isUuid: 'uuid',
  isDateString: 'date-time',
  isIso8601: 'date-time',
};

function objectSchema(cls: DtoClass, stack: DtoClass[]): Schema {
  if (stack.includes(cls)) {
    throw new Error(
      `${cls.name} refers to itself through nested properties; recursive DTOs are not supported`,
    );
  }
  const metadatas = getMetadataStorage().getTargetValidationMetadatas(cls, '', true, false);
  const byProperty = new Map<string, ValidationMetadata[]>();
  for (const m of metadatas) {
    const list = byProperty.get(m.propertyName) ?? [];
    list.push(m);
    byProperty.set(m.propertyName, list);
  }
  const defaults = defaultValues(cls);
  const properties: Record<string, Schema> = {};
  const required: string[] = [];
  for (const [property, list] of byProperty) {
    properties[property] = propertySchema(cls, property, list, defaults, [...stack, cls]);
    const optional = list.some((m) => m.type === ValidationTypes.CONDITIONAL_VALIDATION);
    if (!optional) required.push(property);
  }
  return { type: 'object', properties, required, additionalProperties: false };
}

function propertySchema(
  cls: DtoClass,
  property: string,
  metadatas: ValidationMetadata[],
  defaults: Record<string, unknown>,
  stack: DtoClass[],
): Schema {
  const designType = Reflect.getMetadata('design:type', cls.prototype as object, property) as unknown;
  const own: Schema = {};
  const item: Schema = {};
  const isArray =
    designType === Array || metadatas.some((m) => m.name !== undefined && ARRAY_CHECKS.has(m.name));
  for (const m of metadatas) {
    if (m.type === ValidationTypes.NESTED_VALIDATION) {
      const nested = nestedClass(cls, property);
      if (nested) Object.assign(m.each || isArray ? item : own, objectSchema(nested, stack));
      continue;
    }
    if (m.type !== ValidationTypes.CUSTOM_VALIDATION || !m.name || m.name === 'isArray') continue;
    applyConstraint(m.each ? item : own, m.name, (m.constraints ?? []) as unknown[]);
  }
  let schema: Schema;
  if (isArray) {
    const arrayKeywords = pick(own, ['minItems', 'maxItems', 'uniqueItems']);
    const itemKeywords = omit(own, ['minItems', 'maxItems', 'uniqueItems', 'type']);
    const items = { ...itemKeywords, ...item };
    schema = { type: 'array', ...(Object.keys(items).length > 0 ? { items } : {}), ...arrayKeywords };
  } else {
    schema = { ...item, ...own };
    if (schema.type === undefined) {
      const fallback = designTypeName(designType);
      if (fallback) schema.type = fallback;
    }
  }
  const described = getFieldDescription(cls, property);
  if (described) {
    if (described.title !== undefined) schema.title = described.title;
    schema.description = described.description;
    if (described.examples !== undefined) schema.examples = described.examples;
  }
  if (defaults[property] !== undefined) schema.default = defaults[property];
  return schema;
}

function applyConstraint(target: Schema, name: string, c: unknown[]): void {
  switch (name) {
    case 'isString':
      target.type = 'string';
      return;
    case 'isInt':
      target.type = 'integer';
      return;
    case 'isNumber':
      target.type = 'number';
      return;
    case 'isBoolean':
      target.type = 'boolean';
      return;
    case 'isObject':
      target.type = 'object';
      return;
    case 'isIn':
      target.enum = [...(c[0] as unknown[])];
      return;
    case 'isEnum':
      target.enum = enumValues(c[0] as Record<string, unknown>);
      return;
    case 'equals':
      target.const = c[0];
      return;
    case 'min':
      target.minimum = c[0];
      return;
    case 'max':
      target.maximum = c[0];
      return;
    case 'isDivisibleBy':
      target.multipleOf = c[0];
      return;
    case 'isPositive':
      target.exclusiveMinimum = 0;
      return;
    case 'isNegative':
      target.exclusiveMaximum = 0;
      return;
    case 'minLength':
      target.minLength = c[0];
      return;
    case 'maxLength':
      target.maxLength = c[0];
      return;
    case 'isLength':
      if (c[0] !== undefined && c[0] !== null) target.minLength = c[0];
      if (c[1] !== undefined && c[1] !== null) target.maxLength = c[1];
      return;
    case 'isNotEmpty':
      if (target.type === 'string' || target.type === undefined) target.minLength ??= 1;
      return;
    case 'matches': {
      const pattern = c[0];
      target.pattern = pattern instanceof RegExp ? pattern.source : String(pattern);
      return;
    }
    case 'arrayMinSize':
      target.minItems = c[0];
      return;
    case 'arrayMaxSize':
      target.maxItems = c[0];
      return;
    case 'arrayNotEmpty':
      target.minItems ??= 1;
      return;
    case 'arrayUnique':
      target.uniqueItems = true;
      return;
    default: {
      const format = STRING_FORMATS[name];
      if (format) {
        target.type = 'string';
        target.format = format;
      }
    }
  }
}

/** String values and numeric values of a TypeScript enum, without the reverse-mapping keys of numeric enums. */
function enumValues(entity: Record<string, unknown>): unknown[] {
  return Object.keys(entity)
    .filter((key) => Number.isNaN(Number(key)))
    .map((key) => entity[key]);
}

/** Reads the nested class given by `@Type(() => X)` through class-transformer's own public API. */
function nestedClass(cls: DtoClass, property: string): DtoClass | undefined {
  for (const probe of [{}, [{}]]) {
    const instance = plainToInstance(cls, { [property]: probe }) as Record<string, unknown>;
    const value = instance[property];
    const sample = Array.isArray(value) ? (value[0] as unknown) : value;
    if (sample && typeof sample === 'object' && sample.constructor !== Object) {
      return sample.constructor as DtoClass;
    }
  }
  const designType = Reflect.getMetadata('design:type', cls.prototype as object, property) as unknown;
  if (
    typeof designType === 'function' &&
    ![Object, Array, String, Number, Boolean].includes(designType as never)
  ) {
    return designType as DtoClass;
  }
  return undefined;
}

function defaultValues(cls: DtoClass): Record<string, unknown> {
  try {
    return { ...(new cls() as Record<string, unknown>) };
  } catch {
    return {};
  }
}

function designTypeName(designType: unknown): string | undefined {
  if (designType === String) return 'string';
  if (designType === Number) return 'number';
  if (designType === Boolean) return 'boolean';
  return undefined;
}

function pick(schema: Schema, keys: string[]): Schema {
  return Object.fromEntries(Object.entries(schema).filter(([k]) => keys.includes(k)));
}

function omit(schema: Schema, keys: string[]): Schema {
  return Object.fromEntries(Object.entries(schema).filter(([k]) => !keys.includes(k)));
}
