import type { ElicitResult, SampleResult } from '../../tool-dispatch/index.js';

/** The text of a sampling answer, whatever shape its content has. */
export function sampledText(result: SampleResult): string {
  const items = Array.isArray(result.content) ? result.content : [result.content];
  return items.map((c) => (typeof c.text === 'string' ? c.text : JSON.stringify(c))).join('\n');
}

export function describeElicitation(result: ElicitResult): string {
  return `action=${result.action}, content=${JSON.stringify(result.content ?? {})}`;
}

/** One field of an accepted elicitation, as text (`(none)` when the user gave nothing). */
export function answerField(result: ElicitResult, ...names: string[]): string {
  for (const name of names) {
    const value = result.content?.[name];
    if (value !== undefined) return typeof value === 'string' ? value : JSON.stringify(value);
  }
  return '(none)';
}
