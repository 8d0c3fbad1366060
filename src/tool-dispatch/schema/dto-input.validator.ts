import { plainToInstance } from 'class-transformer';
import { validate, type ValidationError } from 'class-validator';
import type { DtoClass, JsonSchema } from '../tool-dispatch.types.js';
import { buildDtoSchema } from './dto-schema.builder.js';
import {
  capProblems,
  MAX_PROBLEMS,
  renderPath,
  type InputValidator,
  type ValidationOutcome,
} from './input-validator.js';

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
    // Unknown keys are taken out (and reported) before class-transformer sees them: it deduplicates an
    // object's keys with a scan per key (quadratic), and class-validator would write an error object per key.
    const unknown = withoutUnknown(this.schema, plain, root);
    const instance: object = plainToInstance(this.dto, unknown.value, { exposeDefaultValues: true });
    const errors = await validate(instance, {
      whitelist: true,
      forbidNonWhitelisted: true,
      forbidUnknownValues: true,
      validationError: { target: false },
    });
    if (errors.length === 0 && unknown.total === 0) return { ok: true, value: instance };
    const problems = [...unknown.problems, ...flatten(errors, root, [])];
    return {
      ok: false,
      problems: capProblems(problems, problems.length + unknown.total - unknown.problems.length),
    };
  }
}

/**
 * Takes out the properties the DTO does not declare, found by walking the value along the derived schema
 * (every DTO level is an object with `additionalProperties: false`): one look per key, so linear in the
 * value. The walk goes only as deep as the DTO's own nesting, which its author fixed. Values the DTO does
 * not describe are kept as they are.
 */
function withoutUnknown(schema: JsonSchema, value: unknown, root: string): UnknownProperties {
  const found: UnknownProperties = { value, problems: [], total: 0 };
  const visit = (s: JsonSchema, v: unknown, path: string): unknown => {
    if (typeof v !== 'object' || v === null) return v;
    if (Array.isArray(v)) {
      const items = s.items as JsonSchema | undefined;
      if (s.type !== 'array' || !items || typeof items !== 'object') return v;
      return v.map((item: unknown, i) => visit(items, item, `${path}[${i}]`));
    }
    const properties = s.properties as Record<string, JsonSchema> | undefined;
    if (!properties || s.additionalProperties !== false) return v;
    const kept: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(v as Record<string, unknown>)) {
      if (Object.hasOwn(properties, key)) {
        kept[key] = visit(properties[key], child, renderPath(path, [key]));
        continue;
      }
      found.total++;
      if (found.problems.length < MAX_PROBLEMS) {
        found.problems.push(`${renderPath(path, [key])} is not allowed (unknown property)`);
      }
    }
    return kept;
  };
  const kept = visit(schema, value, root);
  if (found.total > 0) found.value = kept;
  return found;
}

interface UnknownProperties {
  /** The value without its unknown properties (the value itself when it has none). */
  value: unknown;
  problems: string[];
  total: number;
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
