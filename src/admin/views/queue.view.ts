/** /admin/queue: every task tool's queue (paused, running, waiting and why, limits) with Pause/Resume. */
export const QUEUE_VIEW = `{{#> layout title="Queue" nav="queue"}}
<h1>Queue</h1>
<p class="hint">Every instance claims queued tasks fairly (the caller running the fewest goes first) and within
the limits each tool declares. A paused tool's calls are accepted and wait; running ones finish. Pausing and
resuming hold on every instance and are recorded in the audit trail.</p>
<table class="list" id="queue-tools">
  <thead><tr><th>Tool</th><th>Paused</th><th>Running</th><th>Waiting</th><th>Paused wait</th><th>Limit wait</th><th>Claimable</th><th>Backoff</th><th title="Leased by an instance whose lease lapsed; recovery queues them again">Lease lapsed</th><th>Limits</th><th></th></tr></thead>
  <tbody>
  {{#each tools}}
    <tr data-tool="{{tool}}"{{#if paused}} class="hit"{{/if}}>
      <td class="mono">{{tool}}{{#if unknown}} (not served here){{/if}}</td>
      <td class="paused">{{#if paused}}yes{{else}}no{{/if}}</td>
      <td>{{running}}</td>
      <td>{{waiting}}</td>
      <td>{{waitingBy.paused}}</td>
      <td>{{waitingBy.limit}}</td>
      <td>{{waitingBy.claimable}}</td>
      <td>{{waitingBy.delayed}}</td>
      <td>{{waitingBy.lapsed}}</td>
      <td>{{limitsText}}</td>
      <td>{{#if paused}}<form method="post" action="/admin/queue/{{url tool}}/resume">
        <input type="hidden" name="_csrf" value="{{../csrf}}"><button type="submit">Resume</button>
      </form>{{else}}{{#unless unknown}}<form method="post" action="/admin/queue/{{url tool}}/pause">
        <input type="hidden" name="_csrf" value="{{../csrf}}"><button type="submit" class="danger">Pause</button>
      </form>{{/unless}}{{/if}}</td>
    </tr>
  {{else}}
    <tr><td colspan="11" class="empty">No tool here can run as a task.</td></tr>
  {{/each}}
  </tbody>
</table>
<h2>By fairness key</h2>
<p class="hint">Whose share a task runs on: its owner, its tenant (<code>TASK_FAIR_SHARE=tenant</code>), or one
share for all (<code>off</code>, shown as "(shared)").</p>
<table class="list" id="queue-keys">
  <thead><tr><th>Fairness key</th><th>Running</th><th>Waiting</th></tr></thead>
  <tbody>
  {{#each fairnessKeys}}
    <tr><td class="mono">{{label}}</td><td>{{running}}</td><td>{{waiting}}</td></tr>
  {{else}}
    <tr><td colspan="3" class="empty">No live task.</td></tr>
  {{/each}}
  </tbody>
</table>
{{/layout}}
`;
