import { decideExecution, type CallSignals, type ExecutionDecision } from './execution-decision.js';
import type { TaskSupport } from '../../tool-dispatch/tool-context.js';

const opts = { inlineWindowMs: 100 };
const supports: (TaskSupport | undefined)[] = [undefined, 'forbidden', 'optional', 'required'];

function legacy(taskSupport: TaskSupport | undefined, taskRequested: boolean): CallSignals {
  return { era: 'legacy', taskSupport, taskRequested };
}
function modern(taskSupport: TaskSupport | undefined, extensionDeclared: boolean): CallSignals {
  return { era: 'modern', taskSupport, extensionDeclared };
}

describe('decideExecution', () => {
  // Every combination of era × taskSupport (absent counts as forbidden) × client signal, with its answer.
  // Rows all have four cells: jest passes a done callback to a test function with more parameters than cells.
  const table: [string, CallSignals, ExecutionDecision['mode'], string | undefined][] = [
    ['legacy absent, no task', legacy(undefined, false), 'inline', undefined],
    ['legacy absent, task', legacy(undefined, true), 'refuse', 'method_not_found'],
    ['legacy forbidden, no task', legacy('forbidden', false), 'inline', undefined],
    ['legacy forbidden, task', legacy('forbidden', true), 'refuse', 'method_not_found'],
    ['legacy optional, no task', legacy('optional', false), 'inline', undefined],
    ['legacy optional, task', legacy('optional', true), 'task', undefined],
    ['legacy required, no task', legacy('required', false), 'refuse', 'method_not_found'],
    ['legacy required, task', legacy('required', true), 'task', undefined],
    ['modern absent, undeclared', modern(undefined, false), 'inline', undefined],
    ['modern absent, declared', modern(undefined, true), 'inline', undefined],
    ['modern forbidden, undeclared', modern('forbidden', false), 'inline', undefined],
    ['modern forbidden, declared', modern('forbidden', true), 'inline', undefined],
    ['modern optional, undeclared', modern('optional', false), 'inline', undefined],
    ['modern optional, declared', modern('optional', true), 'inline_then_task', undefined],
    ['modern required, undeclared', modern('required', false), 'refuse', 'missing_capability'],
    ['modern required, declared', modern('required', true), 'task', undefined],
  ];

  it.each(table)('%s', (_name, call, mode, kind) => {
    const d = decideExecution(call, 'slow_tool', opts);
    expect(d.mode).toBe(mode);
    if (d.mode === 'refuse') expect(d.kind).toBe(kind);
    if (d.mode === 'inline_then_task') expect(d.windowMs).toBe(100);
  });

  it('covers every combination', () => {
    expect(table).toHaveLength(supports.length * 2 * 2);
  });

  it('names the tool and its taskSupport in legacy-era refusals', () => {
    const forbidden = decideExecution(legacy('forbidden', true), 'greet', opts);
    expect(forbidden).toEqual({
      mode: 'refuse',
      kind: 'method_not_found',
      message: "Tool greet does not support task augmentation (taskSupport: 'forbidden')",
    });
    const required = decideExecution(legacy('required', false), 'slow', opts);
    expect(required).toMatchObject({
      message: "Tool slow requires task augmentation (taskSupport: 'required')",
    });
  });

  it('uses the configured inline window', () => {
    expect(decideExecution(modern('optional', true), 't', { inlineWindowMs: 250 })).toEqual({
      mode: 'inline_then_task',
      windowMs: 250,
    });
  });
});
