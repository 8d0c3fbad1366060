import 'reflect-metadata';

export interface FieldDescription {
  description: string;
  title?: string;
  examples?: unknown[];
}

const DESCRIBE_KEY = Symbol('mcp:describe');

/**
 * Documents a DTO property for clients: the text becomes the property's `description` in the derived JSON
 * Schema (and a prompt argument's description). Purely descriptive: validation still needs a class-validator
 * decorator on the property, or the property is refused as unknown.
 */
export function Describe(
  description: string,
  extra: Omit<FieldDescription, 'description'> = {},
): PropertyDecorator {
  return (target, propertyKey) => {
    const own =
      (Reflect.getOwnMetadata(DESCRIBE_KEY, target) as Map<string | symbol, FieldDescription> | undefined) ??
      new Map(readDescriptionMap(target));
    own.set(propertyKey, { description, ...extra });
    Reflect.defineMetadata(DESCRIBE_KEY, own, target);
  };
}

function readDescriptionMap(prototype: object): Map<string | symbol, FieldDescription> {
  return (
    (Reflect.getMetadata(DESCRIBE_KEY, prototype) as Map<string | symbol, FieldDescription> | undefined) ??
    new Map<string | symbol, FieldDescription>()
  );
}

/** The `@Describe` text of a property, inherited ones included. */
export function getFieldDescription(
  cls: abstract new (...args: never[]) => unknown,
  property: string,
): FieldDescription | undefined {
  return readDescriptionMap(cls.prototype as object).get(property);
}
