import { Ajv, type Options } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import * as ajvFormats from 'ajv-formats';
import type { JsonSchema, SchemaSource } from '../tool-dispatch.types.js';
import { DtoInputValidator } from './dto-input.validator.js';
import type { InputValidator } from './input-validator.js';
import { JsonSchemaInputValidator } from './json-schema-input.validator.js';
import { errorMessage } from '../../common/error-message.js';

type FormatsPlugin = (ajv: Ajv | Ajv2020) => unknown;

// ajv-formats is CommonJS with an `exports.default`; depending on the loader the plugin sits at either level.
const formatsModule = ajvFormats as unknown as { default: FormatsPlugin & { default?: FormatsPlugin } };
const addFormats: FormatsPlugin = formatsModule.default.default ?? formatsModule.default;

const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/;
const DRAFT_2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;

/**
 * Turns a schema source (DTO class or raw JSON Schema) into an InputValidator. One compiler per registry, so
 * two registries in one process (tests) never collide on a schema `$id`. Raw schemas are 2020-12 unless their
 * `$schema` says draft-07; other drafts are refused at startup. Compilation never fetches a remote `$ref`.
 */
export class SchemaCompiler {
  private readonly options: Options = { allErrors: true, strict: false, validateFormats: true };
  private readonly ajv2020 = new Ajv2020(this.options);
  private readonly ajv07 = new Ajv(this.options);

  constructor() {
    addFormats(this.ajv2020);
    addFormats(this.ajv07);
  }

  /** Throws an Error with a reason when the source is unusable; the caller adds where it was declared. */
  compile(source: SchemaSource): InputValidator {
    if (typeof source === 'function') return new DtoInputValidator(source);
    if (source === null || typeof source !== 'object' || Array.isArray(source)) {
      throw new Error('schema must be a DTO class or a JSON Schema object');
    }
    const schema = deepFreeze(structuredClone(source));
    if (schema.type !== 'object') {
      throw new Error(
        `schema must have "type": "object" (MCP requires object arguments), got ${JSON.stringify(schema.type)}`,
      );
    }
    const dialect = schema.$schema;
    let ajv: Ajv | Ajv2020;
    if (dialect === undefined || (typeof dialect === 'string' && DRAFT_2020.test(dialect)))
      ajv = this.ajv2020;
    else if (typeof dialect === 'string' && DRAFT_07.test(dialect)) ajv = this.ajv07;
    else
      throw new Error(`unsupported $schema ${JSON.stringify(dialect)} (use JSON Schema 2020-12 or draft-07)`);
    try {
      return new JsonSchemaInputValidator(schema, ajv.compile(structuredClone(source)));
    } catch (err) {
      throw new Error(`invalid JSON Schema: ${errorMessage(err)}`);
    }
  }
}

function deepFreeze<T extends JsonSchema>(value: T): T {
  for (const child of Object.values(value)) {
    if (child && typeof child === 'object') deepFreeze(child as JsonSchema);
  }
  return Object.freeze(value);
}
