import { openStream, type RpcAnswer } from './mcp-http.js';
import { MCP_POST } from './raw-http.js';

/**
 * The application's series in a /metrics scrape, as `name{labels}`. Left out: the runtime's own (nodejs_*,
 * process_*), whose label sets follow the garbage collector and the handles open, and the janitor's, whose
 * series appear on its schedule; neither depends on what clients send.
 */
export function seriesOf(scrape: string): Set<string> {
  const series = new Set<string>();
  for (const line of scrape.split('\n')) {
    if (line === '' || line.startsWith('#') || /^(nodejs_|process_|mcp_janitor_)/.test(line)) continue;
    series.add(line.slice(0, line.lastIndexOf(' ')));
  }
  return series;
}

export async function scrapeSeries(baseUrl: string): Promise<Set<string>> {
  const res = await fetch(`${baseUrl}/metrics`);
  return seriesOf(await res.text());
}

/** Series in `after` that `before` did not have. */
export function newSeries(before: Set<string>, after: Set<string>): string[] {
  return [...after].filter((s) => !before.has(s));
}

/**
 * Calls the conformance fixture test_elicitation in a legacy session and answers its elicitation
 * with a JSON-RPC error of the given code; resolves with the tools/call's own answer (its last SSE event)
 * and the status the POSTed answer got.
 */
export async function answerElicitationWithError(
  url: string,
  headers: Record<string, string>,
  code: unknown,
  id: number,
): Promise<{ answerStatus: number; call: RpcAnswer['json'] }> {
  const call = await openStream(url, {
    method: 'POST',
    headers: { ...MCP_POST, ...headers },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: 'test_elicitation', arguments: { message: 'name?' } },
    }),
  });
  try {
    let ask = await call.next();
    while (ask.json?.method !== 'elicitation/create') ask = await call.next();
    const posted = await fetch(url, {
      method: 'POST',
      headers: { ...MCP_POST, ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: ask.json.id, error: { code, message: 'no' } }),
    });
    await posted.text();
    if (posted.status !== 202) {
      // Refused: answer properly, so the call ends and the test can go on.
      await fetch(url, {
        method: 'POST',
        headers: { ...MCP_POST, ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: ask.json.id, result: { action: 'decline' } }),
      }).then((r) => r.text());
    }
    let done = await call.next();
    while (done.json?.id !== id) done = await call.next();
    return { answerStatus: posted.status, call: done.json };
  } finally {
    call.close();
  }
}
