import { applyDecorators } from '@nestjs/common';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsString, Max, Min } from 'class-validator';

/**
 * The decorators a module's config class declares its environment variables with. `@Env(description)` is
 * what makes a property a variable: the loader reads exactly the properties that carry it (no key list kept
 * by hand), and docs/configuration.md is generated from the same metadata.
 */

export interface EnvVariable {
  /** The variable's name: the property name. */
  name: string;
  description: string;
  /** What the value looks like in the generated docs (`integer, 0 to 65535`, `boolean`, `comma list`, …). */
  type?: string;
  /** The default as the docs show it, when the property's initial value does not say it (derived defaults). */
  default?: string;
}

export interface EnvOptions {
  type?: string;
  default?: string;
}

const VARIABLES = new Map<object, Map<string, EnvVariable>>();
const TYPES = new Map<object, Map<string, string>>();

function slot<V>(store: Map<object, Map<string, V>>, ctor: object): Map<string, V> {
  let m = store.get(ctor);
  if (!m) store.set(ctor, (m = new Map<string, V>()));
  return m;
}

/** Declares the property as an environment variable of its config class, with its documentation. */
export function Env(description: string, options: EnvOptions = {}): PropertyDecorator {
  return (target, key) => {
    const name = String(key);
    slot(VARIABLES, target.constructor).set(name, { name, description, ...options });
  };
}

function typeOf(type: string): PropertyDecorator {
  return (target, key) => {
    slot(TYPES, target.constructor).set(String(key), type);
  };
}

/** The variables a config class declares, in declaration order. */
export function envVariablesOf(cls: object): EnvVariable[] {
  const types = TYPES.get(cls);
  return [...(VARIABLES.get(cls)?.values() ?? [])].map((v) => ({
    ...v,
    type: v.type ?? types?.get(v.name),
  }));
}

export const toInt = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value.trim()) : value;

export const toBool = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off'].includes(v)) return false;
  return value;
};

export const toList = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string'
    ? value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0)
    : value;

export const toHeaderName = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' ? value.trim().toLowerCase() : value;

export const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
export const HTTP_URL = /^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/;
export const POSTGRES_URL = /^postgres(ql)?:\/\/\S+$/;

/** An integer variable within [min, max]; the message names the variable (class-validator's $property). */
export function IntEnv(min: number, max: number): PropertyDecorator {
  const message = `$property must be an integer between ${min} and ${max}`;
  return applyDecorators(
    typeOf(`integer, ${min} to ${max}`),
    Transform(toInt),
    IsInt({ message }),
    Min(min, { message }),
    Max(max, { message }),
  );
}

/** A comma-separated list; blanks around items are dropped. */
export function ListEnv(): PropertyDecorator {
  return applyDecorators(typeOf('comma list'), Transform(toList), IsString({ each: true }));
}

/** A boolean variable: true/false, 1/0, yes/no, on/off. */
export function BoolEnv(): PropertyDecorator {
  return applyDecorators(
    typeOf('boolean'),
    Transform(toBool),
    IsBoolean({ message: '$property must be true or false' }),
  );
}
