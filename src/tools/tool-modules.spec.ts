import 'reflect-metadata';
import { ToolTestHarness } from '../testing/index.js';
import { AppModule } from '../app.module.js';
import { loadConfig } from '../app.config.js';
import { BenchToolsModule } from './bench/bench-tools.module.js';
import { ConformanceModule } from './conformance/conformance.module.js';
import { TextToolsModule } from './examples/text-tools/text-tools.module.js';
import { EXAMPLE_TOOL_MODULES, TOOL_MODULES, toolModules } from './tool-modules.js';

describe('tool modules', () => {
  const harnesses: ToolTestHarness[] = [];
  afterAll(async () => {
    await Promise.all(harnesses.map((h) => h.close()));
  });
  const boot = async (config: ReturnType<typeof loadConfig>) => {
    const harness = await ToolTestHarness.create(toolModules(config));
    harnesses.push(harness);
    return harness;
  };

  it('lists the team modules and the examples, or only the conformance fixtures with MCP_CONFORMANCE_FIXTURES=true', () => {
    // Team modules are appended by the generator, so the list is checked by its known members only.
    expect(TOOL_MODULES).toContain(TextToolsModule);
    expect(EXAMPLE_TOOL_MODULES).toHaveLength(4);
    expect(toolModules(loadConfig({}))).toEqual([...TOOL_MODULES, ...EXAMPLE_TOOL_MODULES]);
    expect(toolModules(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'false' }))).toEqual([
      ...TOOL_MODULES,
      ...EXAMPLE_TOOL_MODULES,
    ]);
    expect(toolModules(loadConfig({ EXAMPLE_TOOLS: 'false' }))).toEqual([...TOOL_MODULES]);
    expect(toolModules(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' }))).toEqual([ConformanceModule]);
  });

  it('adds the benchmark tools only with MCP_BENCH_TOOLS=true', async () => {
    expect(toolModules(loadConfig({ MCP_BENCH_TOOLS: 'true', EXAMPLE_TOOLS: 'false' }))).toEqual([
      ...TOOL_MODULES,
      BenchToolsModule,
    ]);
    expect(toolModules(loadConfig({}))).not.toContain(BenchToolsModule);
    const { registry } = await boot(loadConfig({ MCP_BENCH_TOOLS: 'true' }));
    const bench = registry.listTools().filter((t) => t.name.startsWith('echo'));
    expect(bench.map((t) => [t.name, t.taskSupport])).toEqual([
      ['echo', 'forbidden'],
      ['echo_task', 'optional'],
      ['echo_task_required', 'required'],
      ['echo_task_durable', 'optional'],
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
    const { registry } = await boot(loadConfig({}));
    const names = registry.listTools().map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'word_count',
        'analyse_text',
        'generate_report',
        'approve_refund',
        'lookup_customer',
      ]),
    );
    expect(names.filter((n) => n.startsWith('test_'))).toEqual([]);
    expect(registry.listPrompts().map((p) => p.name)).toContain('summarise');
    expect(registry.listResources().map((r) => r.uri)).toContain('text://glossary');
  });

  it('registers exactly the fixtures, without the team tools, when the flag is on', async () => {
    const { registry } = await boot(loadConfig({ MCP_CONFORMANCE_FIXTURES: 'true' }));
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
