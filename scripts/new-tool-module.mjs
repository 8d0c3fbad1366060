#!/usr/bin/env node
// npm run new:tool-module -- <team-name>
//
// Creates src/tools/<team-name>/ (a module, a service with one tool, its input DTO and a unit spec written
// with the testing kit) and lists the module in src/tools/tool-modules.ts. Everything is checked and
// formatted in memory first, so a refusal or a failure changes nothing. No network, no new dependencies.
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const EXIT_USAGE = 2; // bad or missing name
const EXIT_CONFLICT = 3; // the team, its module or its tool exists already
const RESERVED = new Set(['conformance', 'example', 'examples', 'testing']);
const NAME = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$/;
const MAX_LENGTH = 40;

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const toolsDir = join(root, 'src', 'tools');
const registryFile = join(toolsDir, 'tool-modules.ts');

function refuse(code, message) {
  process.stderr.write(`new:tool-module: ${message}\nNothing was changed.\n`);
  process.exit(code);
}

const args = process.argv.slice(2);
if (args.length !== 1 || args[0].startsWith('-')) {
  refuse(EXIT_USAGE, 'usage: npm run new:tool-module -- <team-name>   (kebab-case, e.g. billing-ops)');
}
const team = args[0];
if (!NAME.test(team) || team.length > MAX_LENGTH) {
  refuse(
    EXIT_USAGE,
    `"${team}" is not a valid team name: use kebab-case (lower-case letters and digits in words joined by ` +
      `single hyphens, starting with a letter), at most ${MAX_LENGTH} characters, e.g. billing-ops`,
  );
}
if (RESERVED.has(team)) {
  refuse(EXIT_USAGE, `"${team}" is reserved (${[...RESERVED].join(', ')} belong to the project); pick another name`);
}

const pascal = team
  .split('-')
  .map((w) => w[0].toUpperCase() + w.slice(1))
  .join('');
const snake = team.replaceAll('-', '_');
const names = {
  dir: join(toolsDir, team),
  module: `${pascal}Module`,
  service: `${pascal}Service`,
  input: `${pascal}EchoInput`,
  tool: `${snake}_echo`,
};

const teamDir = relative(root, names.dir);
if (existsSync(names.dir)) refuse(EXIT_CONFLICT, `${teamDir}/ exists already; a team has one folder`);
const registry = readFileSync(registryFile, 'utf8');
if (new RegExp(`\\b${names.module}\\b`).test(registry)) {
  refuse(EXIT_CONFLICT, `${names.module} is already listed in src/tools/tool-modules.ts`);
}
if (toolNameTaken(names.tool)) refuse(EXIT_CONFLICT, `a tool named ${names.tool} exists already under src/tools`);

const LIST = /(export const TOOL_MODULES: readonly Type\[\] = \[)([\s\S]*?)(\];)/;
const list = LIST.exec(registry);
if (!list) {
  refuse(1, 'src/tools/tool-modules.ts has no `export const TOOL_MODULES: readonly Type[] = [...]` list to add to');
}
const members = list[2].trim().replace(/,$/, '');
const imports = [...registry.matchAll(/^import [^;]+;\n/gm)];
const lastImport = imports[imports.length - 1];
const importLine = `import { ${names.module} } from './${team}/${team}.module.js';\n`;
const updatedRegistry =
  registry.slice(0, lastImport.index + lastImport[0].length) +
  importLine +
  registry.slice(lastImport.index + lastImport[0].length).replace(LIST, (_, open, __, close) =>
    `${open}${members ? `${members}, ` : ''}${names.module}${close}`,
  );

const files = {
  [`${team}.module.ts`]: `import { Module } from '@nestjs/common';
import { ${names.service} } from './${team}.service.js';

/** Owned by the ${team} team. Listed in src/tools/tool-modules.ts; see docs/tool-authoring.md. */
@Module({ providers: [${names.service}] })
export class ${names.module} {}
`,
  [`${team}-echo.input.ts`]: `import { IsBoolean, IsOptional, IsString, MaxLength } from 'class-validator';
import { Describe } from '../../tool-dispatch/index.js';

/** The tool's arguments: the JSON Schema in tools/list is derived from these decorators. */
export class ${names.input} {
  @IsString()
  @MaxLength(1000)
  @Describe('The message to send back')
  message: string;

  @IsOptional()
  @IsBoolean()
  @Describe('Answer in capitals')
  shout?: boolean = false;
}
`,
  [`${team}.service.ts`]: `import { Injectable } from '@nestjs/common';
import { McpTool, type ToolContext } from '../../tool-dispatch/index.js';
import { ${names.input} } from './${team}-echo.input.js';

/**
 * The ${team} team's tools. A starter tool to replace with your own: add methods with @McpTool, and the
 * server finds them at startup. The guide is docs/tool-authoring.md; worked examples are in src/tools/examples.
 */
@Injectable()
export class ${names.service} {
  @McpTool({
    name: '${names.tool}',
    title: 'Echo (${team})',
    description: 'Sends the message back. A starter tool of the ${team} team.',
    input: ${names.input},
    annotations: { readOnlyHint: true },
  })
  async echo(args: ${names.input}, ctx: ToolContext): Promise<string> {
    await ctx.log('debug', { tool: '${names.tool}', length: args.message.length });
    return args.shout ? args.message.toUpperCase() : args.message;
  }
}
`,
  [`${team}.service.spec.ts`]: `import { ToolTestHarness } from '../../testing/index.js';
import { ${names.module} } from './${team}.module.js';

describe('${names.module}', () => {
  let tools: ToolTestHarness;
  beforeAll(async () => {
    tools = await ToolTestHarness.create([${names.module}]);
  });
  afterAll(async () => {
    await tools.close();
  });

  it('publishes ${names.tool} with a schema derived from its input DTO', () => {
    expect(tools.describe('${names.tool}')?.inputSchema).toMatchObject({
      type: 'object',
      required: ['message'],
      additionalProperties: false,
    });
  });

  it('sends the message back', async () => {
    const { result } = await tools.call('${names.tool}', { message: 'hello', shout: true });
    expect(result).toEqual({ content: [{ type: 'text', text: 'HELLO' }] });
  });

  it('refuses arguments that break the DTO', async () => {
    await expect(tools.call('${names.tool}', { message: 42 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
  });
});
`,
};

// Format with the project's Prettier setup before anything touches the disk.
const prettier = await import('prettier');
const formatted = {};
for (const [file, text] of Object.entries(files)) formatted[file] = await format(join(names.dir, file), text);
const formattedRegistry = await format(registryFile, updatedRegistry);

try {
  mkdirSync(names.dir);
  for (const [file, text] of Object.entries(formatted)) writeFileSync(join(names.dir, file), text, { flag: 'wx' });
  writeFileSync(registryFile, formattedRegistry);
} catch (err) {
  rmSync(names.dir, { recursive: true, force: true });
  writeFileSync(registryFile, registry);
  process.stderr.write(`new:tool-module: could not write the module (${err.message}); nothing was changed.\n`);
  process.exit(1);
}

process.stdout.write(
  [
    `Created ${teamDir}/ and listed ${names.module} in src/tools/tool-modules.ts:`,
    ...Object.keys(formatted).map((f) => `  ${teamDir}/${f}`),
    '',
    `Tool ${names.tool} is served on the next start. Next:`,
    `  npm run build && node --experimental-vm-modules node_modules/jest/bin/jest.js ${teamDir}`,
    '  npm run lint && npm run typecheck',
    '  then replace the echo tool with yours: docs/tool-authoring.md',
    '',
  ].join('\n'),
);

async function format(filepath, text) {
  const options = (await prettier.resolveConfig(filepath)) ?? {};
  return prettier.format(text, { ...options, filepath });
}

function toolNameTaken(tool) {
  const needle = new RegExp(`name:\\s*['"]${tool}['"]`);
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).some((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return walk(path);
      return entry.name.endsWith('.ts') && needle.test(readFileSync(path, 'utf8'));
    });
  return walk(toolsDir);
}
