import type { ErrorObject, ValidateFunction } from 'ajv';
import type { JsonSchema } from '../tool-dispatch.types.js';
import {
  capProblems,
  MAX_PROBLEMS,
  renderPath,
  type InputValidator,
  type ValidationOutcome,
} from './input-validator.js';

const TYPE_NAMES: Record<string, string> = {
  integer: 'an integer',
  number: 'a number',
  string: 'a string',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/**
 * A raw JSON Schema compiled by ajv. The schema given by the tool author is kept as given and emitted verbatim
 * in `tools/list`; arguments are checked against it without coercion or defaults, so the handler sees exactly
 * what the client sent.
 */
export class JsonSchemaInputValidator implements InputValidator {
  constructor(
    readonly schema: JsonSchema,
    private readonly check: ValidateFunction,
  ) {}

  async validate(value: unknown, root: string): Promise<ValidationOutcome> {
    const subject = value ?? {};
    if (this.check(subject)) return { ok: true, value: subject };
    // ajv (allErrors) reports every bad key; only the first few are described, the rest counted.
    const errors = this.check.errors ?? [];
    const problems = new Set<string>();
    let described = 0;
    for (; described < errors.length && problems.size < MAX_PROBLEMS; described++) {
      problems.add(describe(errors[described], root));
    }
    const total = problems.size + errors.length - described;
    return { ok: false, problems: capProblems([...problems], total) };
  }
}

function describe(error: ErrorObject, root: string): string {
  const segments = error.instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const path = renderPath(root, segments);
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${renderPath(path, [String(params.missingProperty)])} is required`;
    case 'additionalProperties':
    case 'unevaluatedProperties': {
      const name = params.additionalProperty ?? params.unevaluatedProperty;
      return `${renderPath(path, [String(name)])} is not allowed (unknown property)`;
    }
    case 'type': {
      const types = String(params.type)
        .split(',')
        .map((t) => TYPE_NAMES[t] ?? t);
      return `${path} must be ${types.join(' or ')}`;
    }
    case 'enum':
      return `${path} must be one of ${JSON.stringify(params.allowedValues)}`;
    default:
      return `${path} ${error.message ?? 'is invalid'}`;
  }
}
