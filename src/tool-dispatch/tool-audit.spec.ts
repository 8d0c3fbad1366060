import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { bootToolRegistry, bootToolRegistryFailure } from '../../test/support/tool-registry-context.js';
import { McpTool, type TaskSupport, type ToolAuditFields } from './index.js';
import { AUDIT_FIELD_MAX_CHARS, auditedFields } from './tool-audit.js';

const INPUT = { type: 'object', properties: { path: { type: 'string' }, note: { type: 'string' } } };
const OUTPUT = { type: 'object', properties: { count: { type: 'number' } } };

/** A module with one tool declaring `audit` (with an output schema unless `noOutput`). */
function moduleWith(audit: unknown, opts: { taskSupport?: TaskSupport; noOutput?: boolean } = {}) {
  @Injectable()
  class AuditedTools {
    @McpTool({
      name: 'audited',
      description: 'declares audited fields',
      taskSupport: opts.taskSupport ?? 'optional',
      input: INPUT,
      ...(opts.noOutput ? {} : { output: OUTPUT }),
      audit: audit as ToolAuditFields,
    })
    run(): Record<string, unknown> {
      return { count: 1 };
    }
  }
  @Module({ providers: [AuditedTools] })
  class AuditedModule {}
  return AuditedModule;
}

async function problemsOf(audit: unknown, opts?: Parameters<typeof moduleWith>[1]): Promise<string[]> {
  const err = await bootToolRegistryFailure(moduleWith(audit, opts));
  return (err as { data?: { problems?: string[] } }).data?.problems ?? [err.message];
}

describe('audited fields (McpToolOptions.audit)', () => {
  it('keeps a valid declaration on the descriptor; none declared means none stored', async () => {
    const cases: Array<[unknown, unknown]> = [
      [undefined, { arguments: [], result: [] }],
      [{ arguments: ['path'] }, { arguments: ['path'], result: [] }],
      [
        { arguments: ['path', 'note'], result: ['count'] },
        { arguments: ['path', 'note'], result: ['count'] },
      ],
    ];
    for (const [declared, policy] of cases) {
      const { app, registry } = await bootToolRegistry(moduleWith(declared));
      try {
        expect(registry.getTool('audited')?.audit).toEqual(policy);
      } finally {
        await app.close();
      }
    }
  });

  it('stops the boot naming each mistake', async () => {
    const at = 'AuditedTools.run (@McpTool): audit';
    expect(await problemsOf({ arguments: ['pathh'] })).toEqual([
      `${at}.arguments names "pathh", which the input schema does not declare`,
    ]);
    expect(await problemsOf({ result: ['total'] })).toEqual([
      `${at}.result names "total", which the output schema does not declare`,
    ]);
    expect(await problemsOf({ result: ['count'] }, { noOutput: true })).toEqual([
      `${at}.result needs an output schema: the fields come from the structured result`,
    ]);
    expect(await problemsOf({ arguments: 'path' })).toEqual([
      `${at}.arguments must be an array of top-level field names`,
    ]);
    expect(await problemsOf({ arguments: ['path'], results: ['count'] })).toEqual([
      `${at}.results is not an option (known: arguments, result)`,
    ]);
    expect(await problemsOf({ arguments: ['path'] }, { taskSupport: 'forbidden' })).toEqual([
      `${at} applies to task runs only: declare taskSupport 'optional' or 'required'`,
    ]);
    expect(await problemsOf({ arguments: ['path', 'path'] })).toEqual([
      `${at}.arguments names a field twice`,
    ]);
    expect(await problemsOf(['path'])).toEqual([
      `${at} must be an object ({ arguments?: string[], result?: string[] })`,
    ]);
  });

  it('refuses a field the logs redact, even when the schema declares it', async () => {
    @Injectable()
    class SecretTools {
      @McpTool({
        name: 'secretive',
        description: 'takes a password',
        taskSupport: 'optional',
        input: { type: 'object', properties: { password: { type: 'string' } } },
        audit: { arguments: ['password'] },
      })
      run(): string {
        return 'ok';
      }
    }
    @Module({ providers: [SecretTools] })
    class SecretModule {}
    const err = await bootToolRegistryFailure(SecretModule);
    expect((err as { data?: { problems?: string[] } }).data?.problems).toEqual([
      'SecretTools.run (@McpTool): audit.arguments names "password", a field the logs redact: it cannot be audited',
    ]);
  });
});

describe('auditedFields', () => {
  it('keeps only the named fields, redacted like the logs, long values cut', () => {
    const long = 'x'.repeat(AUDIT_FIELD_MAX_CHARS + 10);
    expect(
      auditedFields(
        {
          path: '/a',
          n: 3,
          flag: false,
          url: 'https://bob:hunter2@example.com/x',
          nested: { token: 'abc123', keep: 1 },
          plain: { keep: 1 },
          long,
          other: 'never',
        },
        ['path', 'n', 'flag', 'url', 'nested', 'plain', 'long', 'absent'],
      ),
    ).toEqual({
      path: '/a',
      n: 3,
      flag: false,
      url: 'https://bob:[REDACTED]@example.com/x',
      nested: '{"token":[REDACTED],"keep":1}',
      plain: { keep: 1 },
      long: `${'x'.repeat(AUDIT_FIELD_MAX_CHARS)}…[truncated]`,
    });
    expect(auditedFields({ a: 1 }, [])).toBeUndefined();
    expect(auditedFields('not an object', ['a'])).toBeUndefined();
    expect(auditedFields({ b: 1 }, ['a'])).toBeUndefined();
  });
});
