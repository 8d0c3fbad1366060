/** /admin/janitor: when it last ran, how far behind it is, what waits for it. */
export const JANITOR_VIEW = `{{#> layout title="Janitor" nav="janitor"}}
<h1>Janitor</h1>
<dl class="facts">
  <dt>Schedule</dt><dd>{{#if enabled}}every {{intervalMs}} ms, batches of {{batchSize}}, {{dutyPercent}} % duty{{else}}JANITOR_ENABLED=false on this instance{{/if}}</dd>
  <dt>Last completed run</dt><dd>{{#if lastRun}}<time datetime="{{iso lastRun}}">{{iso lastRun}}</time> ({{ago lastRun}}){{else}}none yet on this instance{{/if}}</dd>
  <dt>Lag</dt><dd>expire {{lag.expire}} s · delete {{lag.delete}} s <span class="hint">(age of the oldest row it should have swept)</span></dd>
</dl>
<p class="hint">Runs take a lock: one instance sweeps at a time, so "last completed run" is this instance's; the
lag and the backlog are read from the database and the same everywhere.</p>
<h2>Backlog</h2>
<table class="list">
  <thead><tr><th>What</th><th>Tasks</th></tr></thead>
  <tbody>
    <tr><td>Live tasks past their ttl (to expire)</td><td>{{bounded backlog.dueToExpire}}</td></tr>
    <tr><td>Live tasks whose lease lapsed (to rescue)</td><td>{{bounded backlog.leaseLapsed}}</td></tr>
    <tr><td>Finished tasks past ttl + grace (to delete)</td><td>{{bounded backlog.dueToDelete}}</td></tr>
    <tr><td>Queued tasks waiting for a worker</td><td>{{bounded backlog.queued}}</td></tr>
  </tbody>
</table>
<h2>Since this instance started</h2>
<table class="list">
  <thead><tr><th>Counter</th><th>Value</th></tr></thead>
  <tbody>
  {{#each counters}}<tr><td>{{name}}</td><td>{{value}}</td></tr>{{/each}}
  </tbody>
</table>
{{/layout}}
`;
