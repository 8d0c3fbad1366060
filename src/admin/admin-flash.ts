/**
 * The flash messages shown after an action's redirect (POST → 303 → GET). The query string carries a code
 * from this list only, never text: a link cannot make the console say something it did not.
 */
const FLASH = {
  cancelled: { tone: 'ok', text: 'Task cancelled. Its owner sees it as cancelled.' },
  'already-finished': { tone: 'warn', text: 'The task had already finished: nothing to cancel.' },
  busy: { tone: 'warn', text: 'The task is locked by another change right now; try again.' },
  redriven: { tone: 'ok', text: 'Redriven: this new task is queued and runs as the same owner.' },
  'not-finished': { tone: 'warn', text: 'Only a completed, failed or cancelled task can be redriven.' },
  limit: { tone: 'warn', text: 'A task creation limit refused the redrive (the server log names it).' },
  ended: { tone: 'ok', text: 'Session ended: its next request gets 404 on every instance.' },
  'already-ended': { tone: 'warn', text: 'The session had already ended.' },
  'stale-form': { tone: 'warn', text: 'That form was already used for another task: nothing was done.' },
  paused: {
    tone: 'ok',
    text: "Paused on every instance: the tool's queued and new calls wait; running ones finish.",
  },
  'already-paused': { tone: 'warn', text: 'The tool was already paused: nothing changed.' },
  resumed: { tone: 'ok', text: "Resumed: the tool's waiting calls run as slots and its limits allow." },
  'already-resumed': { tone: 'warn', text: 'The tool was not paused: nothing changed.' },
} as const;
export type FlashCode = keyof typeof FLASH;

export function flashOf(code: unknown): { tone: string; text: string } | undefined {
  return typeof code === 'string' && Object.hasOwn(FLASH, code) ? FLASH[code as FlashCode] : undefined;
}
