/**
 * The `json-schema-2020-12` scenario's input schema. It must come back from `tools/list` exactly as written
 * ($schema, $defs with $anchor, $ref, allOf/anyOf, if/then/else, additionalProperties), which is what a raw
 * JSON Schema `input` guarantees.
 */
export const JSON_SCHEMA_2020_12_INPUT = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: {
        street: { type: 'string' },
        city: { type: 'string' },
      },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: {
    properties: { contactMethod: { const: 'phone' } },
    required: ['contactMethod'],
  },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};
