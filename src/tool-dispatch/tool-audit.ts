import { REDACTED_KEYS, redactSecrets } from '../logging/redact.js';
import type { TaskSupport } from './tool-context.js';
import { NO_AUDIT, type AuditPolicy, type JsonSchema } from './tool-dispatch.types.js';

const AUDIT_KEYS = ['arguments', 'result'];
/** How many characters of one opted-in field the audit trail keeps (a row stays small whatever a call sends). */
export const AUDIT_FIELD_MAX_CHARS = 1024;
/** Field names whose values the logs never show: a tool cannot opt them into the audit trail either. */
const SECRET_NAMES = new Set(
  REDACTED_KEYS.filter((k) => !k.includes('.') && !k.includes('[')).map((k) => k.toLowerCase()),
);

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The top-level property names a schema declares, or undefined when it declares none (anything goes). */
function declaredProperties(schema: JsonSchema | undefined): Set<string> | undefined {
  const props = schema?.properties;
  return isPlainObject(props) ? new Set(Object.keys(props)) : undefined;
}

/**
 * `McpToolOptions.audit` validated, each mistake pushed onto `problems` (the explorer stops the boot with
 * them), e.g. `audit.arguments names "pathh", which the input schema does not declare`. Only task runs are
 * audited, so a tool that never runs as a task cannot opt in; a result field needs an output schema (the
 * fields come from the structured result).
 */
export function auditPolicyOf(
  raw: unknown,
  tool: { taskSupport: TaskSupport; input: JsonSchema; output?: JsonSchema },
  where: string,
  problems: string[],
): AuditPolicy {
  if (raw === undefined) return NO_AUDIT;
  const at = `${where}: audit`;
  if (!isPlainObject(raw)) {
    problems.push(`${at} must be an object ({ arguments?: string[], result?: string[] })`);
    return NO_AUDIT;
  }
  const before = problems.length;
  for (const k of Object.keys(raw)) {
    if (!AUDIT_KEYS.includes(k))
      problems.push(`${at}.${k} is not an option (known: ${AUDIT_KEYS.join(', ')})`);
  }
  if (tool.taskSupport === 'forbidden') {
    problems.push(`${at} applies to task runs only: declare taskSupport 'optional' or 'required'`);
  }
  const fields = (key: 'arguments' | 'result', schema: JsonSchema | undefined, label: string): string[] => {
    const list = raw[key];
    if (list === undefined) return [];
    if (!Array.isArray(list) || list.some((f) => typeof f !== 'string' || f.length === 0)) {
      problems.push(`${at}.${key} must be an array of top-level field names`);
      return [];
    }
    const names = list as string[];
    if (key === 'result' && !tool.output && names.length > 0) {
      problems.push(`${at}.result needs an output schema: the fields come from the structured result`);
      return [];
    }
    const declared = declaredProperties(schema);
    for (const name of names) {
      if (SECRET_NAMES.has(name.toLowerCase())) {
        problems.push(`${at}.${key} names "${name}", a field the logs redact: it cannot be audited`);
      } else if (declared && !declared.has(name)) {
        problems.push(`${at}.${key} names "${name}", which the ${label} schema does not declare`);
      }
    }
    if (new Set(names).size !== names.length) problems.push(`${at}.${key} names a field twice`);
    return names;
  };
  const args = fields('arguments', tool.input, 'input');
  const result = fields('result', tool.output, 'output');
  if (problems.length > before) return NO_AUDIT;
  if (args.length === 0 && result.length === 0) return NO_AUDIT;
  return Object.freeze({ arguments: Object.freeze([...args]), result: Object.freeze([...result]) });
}

/**
 * The opted-in `fields` of `source` as the audit trail stores them: each value passed through the log
 * redaction (as JSON text for a non-string) and cut at AUDIT_FIELD_MAX_CHARS; a field that is absent is
 * left out. Undefined when nothing is stored.
 */
export function auditedFields(
  source: unknown,
  fields: readonly string[],
): Record<string, unknown> | undefined {
  if (fields.length === 0 || !isPlainObject(source)) return undefined;
  const out: Record<string, unknown> = {};
  for (const name of fields) {
    if (!Object.hasOwn(source, name) || source[name] === undefined) continue;
    out[name] = auditedValue(source[name]);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function auditedValue(value: unknown): unknown {
  if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  const redacted = redactSecrets(text);
  const cut =
    redacted.length > AUDIT_FIELD_MAX_CHARS
      ? `${redacted.slice(0, AUDIT_FIELD_MAX_CHARS)}…[truncated]`
      : redacted;
  if (typeof value === 'string' || cut !== text) return cut;
  // An object or array the redaction did not touch stays structured (a reader can filter on it).
  return value;
}
