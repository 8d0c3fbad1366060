import 'reflect-metadata';
import type { INestApplicationContext } from '@nestjs/common';
import { bootToolRegistry } from '../../test/support/tool-registry-context.js';
import { AppModule } from '../app.module.js';
import { loadConfig } from '../config/load-config.js';
import { BenchToolsModule } from './bench/bench-tools.module.js';
import { ConformanceModule } from './conformance/conformance.module.js';
import { TextToolsModule } from './example/text-tools.module.js';
import { toolModules } from './tool-modules.js';

describe('tool modules', () => {
  const apps: INestApplicationContext[] = [];
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
  });

  it('lists the team modules, or only the conformance fixtures with MCP_CONFORMANCE_FIXTURES=true', () => {
    expect(toolModules(loadConfig({}))).toEqual([TextToolsModule]);
    expect(toolModules(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'false' }))).toEqual([TextToolsModule]);
    expect(toolModules(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' }))).toEqual([ConformanceModule]);
  });

  it('adds the benchmark tools only with MCP_BENCH_TOOLS=true', async () => {
    expect(toolModules(loadConfig({ MCP_BENCH_TOOLS: 'true' }))).toEqual([TextToolsModule, BenchToolsModule]);
    const { app, registry } = await bootToolRegistry(...toolModules(loadConfig({ MCP_BENCH_TOOLS: 'true' })));
    apps.push(app);
    const bench = registry.listTools().filter((t) => t.name.startsWith('echo'));
    expect(bench.map((t) => [t.name, t.taskSupport])).toEqual([
      ['echo', 'forbidden'],
      ['echo_task', 'optional'],
      ['echo_task_required', 'required'],
    ]);
  });

  it('is what AppModule imports', () => {
    const off = AppModule.forRoot(loadConfig({})).imports ?? [];
    const on = AppModule.forRoot(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' })).imports ?? [];
    expect(off).toContain(TextToolsModule);
    expect(off).not.toContain(ConformanceModule);
    expect(on).toContain(ConformanceModule);
    expect(on).not.toContain(TextToolsModule);
  });

  it('registers no fixture tools when the flag is off', async () => {
    const { app, registry } = await bootToolRegistry(...toolModules(loadConfig({})));
    apps.push(app);
    const names = registry.listTools().map((t) => t.name);
    expect(names).toEqual(['word_count', 'analyse_text']);
    expect(registry.listPrompts().map((p) => p.name)).toEqual(['summarise']);
    expect(registry.listResources().map((r) => r.uri)).toEqual(['text://glossary']);
  });

  it('registers exactly the fixtures, without the team tools, when the flag is on', async () => {
    const { app, registry } = await bootToolRegistry(
      ...toolModules(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' })),
    );
    apps.push(app);
    const names = registry.listTools().map((t) => t.name);
    // The suite calls the first listed tool with no arguments: it must be one that needs none.
    expect(names[0]).toBe('test_simple_text');
    expect(names).not.toContain('word_count');
    expect(names).toEqual(
      expect.arrayContaining([
        'test_simple_text',
        'test_reconnection',
        'test_custom_headers',
        'test_image_content',
        'test_audio_content',
        'test_embedded_resource',
        'test_multiple_content_types',
        'test_tool_with_logging',
        'test_error_handling',
        'test_tool_with_progress',
        'test_sampling',
        'test_elicitation',
        'test_elicitation_sep1034_defaults',
        'test_elicitation_sep1330_enums',
        'json_schema_2020_12_tool',
        'test_missing_capability',
        'test_input_required_result_elicitation',
        'test_input_required_result_capabilities',
        'greet',
        'slow_compute',
        'failing_job',
        'protocol_error_job',
        'confirm_delete',
        'multi_input',
        'test_tool_with_task',
      ]),
    );
    expect(registry.listResources().map((r) => r.uri)).toEqual([
      'test://static-binary',
      'test://static-text',
      'test://watched-resource',
    ]);
    expect(registry.listResourceTemplates().map((t) => t.uriTemplate)).toEqual(['test://template/{id}/data']);
    expect(registry.listPrompts().map((p) => p.name)).toEqual([
      'test_input_required_result_prompt',
      'test_prompt_with_arguments',
      'test_prompt_with_embedded_resource',
      'test_prompt_with_image',
      'test_simple_prompt',
    ]);
  });
});
