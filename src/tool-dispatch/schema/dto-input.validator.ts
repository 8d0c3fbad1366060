import { plainToInstance } from 'class-transformer';
import { validate, type ValidationError } from 'class-validator';
import type { DtoClass, JsonSchema } from '../tool-dispatch.types.js';
import { buildDtoSchema } from './dto-schema.builder.js';
import { renderPath, type InputValidator, type ValidationOutcome } from './input-validator.js';

/**
 * Validates with class-validator and hands the handler an instance of the DTO (defaults applied, nested
 * `@Type` classes instantiated). Unknown properties are refused rather than silently stripped: a typo in an
 * argument name must not turn into a call that quietly ignores what the user asked for.
 */
export class DtoInputValidator implements InputValidator {
  readonly schema: JsonSchema;

  constructor(private readonly dto: DtoClass) {
    this.schema = Object.freeze(buildDtoSchema(dto));
  }

  async validate(value: unknown, root: string): Promise<ValidationOutcome> {
    const plain = value ?? {};
    if (typeof plain !== 'object' || Array.isArray(plain)) {
      return { ok: false, problems: [`${root} must be an object`] };
    }
    const instance: object = plainToInstance(this.dto, plain, { exposeDefaultValues: true });
    const errors = await validate(instance, {
      whitelist: true,
      forbidNonWhitelisted: true,
      forbidUnknownValues: true,
      validationError: { target: false },
    });
    if (errors.length === 0) return { ok: true, value: instance };
    return { ok: false, problems: flatten(errors, root, []) };
  }
}

function flatten(errors: ValidationError[], root: string, parents: string[]): string[] {
  return errors.flatMap((error) => {
    const segments = [...parents, error.property];
    const path = renderPath(root, segments);
    const own = Object.entries(error.constraints ?? {}).map(([kind, message]) => {
      if (kind === 'whitelistValidation') return `${path} is not allowed (unknown property)`;
      if (error.value === undefined) return `${path} is required`;
      return rewrite(message, error.property, path);
    });
    const unique = [...new Set(own)];
    return [...unique, ...flatten(error.children ?? [], root, segments)];
  });
}

/** class-validator messages name the bare property; put the full path in its place. */
function rewrite(message: string, property: string, path: string): string {
  const escaped = property.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`(^|\\s)${escaped}(?=\\s|$)`);
  return pattern.test(message) ? message.replace(pattern, `$1${path}`) : `${path}: ${message}`;
}
