/**
 * How much the console reads per page, in one place: every console query is bounded by one of these, so
 * their cost does not grow with the task table (see bench/console.mjs).
 */
export const CONSOLE_LIMITS = {
  /** Rows per page of the task list and of the session list (keyset pages, never OFFSET). */
  pageSize: 50,
  /** Finished tasks are counted up to this many per status, and so is each janitor backlog (live: exact). */
  countBound: 10_000,
  /** Audit rows on a task's timeline. */
  timeline: 200,
  /** Characters of a checkpoint's indented JSON shown on a task's page. */
  checkpointPreviewChars: 4000,
  /** "Redriven as" links on a task's page. */
  redrivenAs: 20,
  /** Instances listed, and how long a stopped one stays listed. */
  instances: 200,
  stoppedShownMs: 3_600_000,
} as const;
