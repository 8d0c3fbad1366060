// The public testing kit for tool modules. Tool tests import from here and nowhere else in testing/.
// Unit level (no database, no HTTP):
export { ToolTestHarness, RecordingNotifier } from './tool-test-harness.js';
export type {
  CallOptions,
  CallOutcome,
  ToolHarnessOptions,
  TypedCallToolResult,
} from './tool-test-harness.js';
export type { Principal } from '../principals/principal.js';
export { RecordingToolContext, testPrincipal } from './recording-tool-context.js';
export type {
  RecordedInput,
  RecordedLog,
  RecordingToolContextOptions,
  ScriptedAnswer,
  ScriptedAnswers,
} from './recording-tool-context.js';
// Server level (the real application on a test database, real clients):
export { McpTestServer } from './mcp-test-server.js';
export type { ConnectOptions, McpTestServerOptions } from './mcp-test-server.js';
export {
  McpRpcError,
  ModernMcpClient,
  MODERN_PROTOCOL_VERSION,
  TASKS_EXTENSION,
} from './modern-mcp-client.js';
export type {
  InputAnswerer,
  InputRequest,
  InputRetry,
  ModernCallReply,
  ModernClientOptions,
  ModernRun,
  ModernToolResult,
  ModernTask,
} from './modern-mcp-client.js';
