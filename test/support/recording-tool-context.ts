// Moved to the public testing kit (src/testing); kept so existing suites keep their import path.
export {
  RecordingToolContext,
  type RecordedInput,
  type ScriptedAnswers as RecordingAnswers,
} from '../../src/testing/recording-tool-context.js';
