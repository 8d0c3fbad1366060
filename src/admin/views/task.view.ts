/** /admin/tasks/:id: what the task is, its actions, its timeline from the audit trail. */
export const TASK_VIEW = `{{#> layout title=task.id nav="tasks"}}
<h1>Task <span class="mono">{{task.id}}</span> <span class="status status-{{task.status}}">{{task.status}}</span></h1>
<div class="actions">
  {{#if live}}
  <form method="post" action="/admin/tasks/{{task.id}}/cancel">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <button type="submit" class="danger">Cancel task</button>
  </form>
  {{/if}}
  {{#if finished}}
  <form method="post" action="/admin/tasks/{{task.id}}/redrive">
    <input type="hidden" name="_csrf" value="{{csrf}}">
    <input type="hidden" name="submission" value="{{submission}}">
    <button type="submit">Redrive (run again as a new task)</button>
  </form>
  {{/if}}
</div>
<dl class="facts">
  <dt>Tool</dt><dd>{{task.toolName}}</dd>
  <dt>Owner</dt><dd>{{#if task.ownerName}}{{task.ownerName}} · {{/if}}<a class="mono" href="/admin/tasks?owner={{url task.ownerId}}">{{task.ownerId}}</a></dd>
  <dt>Era</dt><dd>{{task.era}}{{#if task.sessionId}} · session <span class="mono">{{task.sessionId}}</span>{{/if}}</dd>
  <dt>Message</dt><dd>{{task.statusMessage}}</dd>
  <dt>Created</dt><dd><time datetime="{{iso task.createdAt}}">{{iso task.createdAt}}</time> ({{ago task.createdAt}})</dd>
  <dt>Updated</dt><dd><time datetime="{{iso task.lastUpdatedAt}}">{{iso task.lastUpdatedAt}}</time> ({{ago task.lastUpdatedAt}})</dd>
  <dt>Expires</dt><dd>{{iso task.expiresAt}}</dd>
  <dt>Instance</dt><dd class="mono">{{#if task.instanceId}}{{task.instanceId}}{{#if task.leaseExpiresAt}} (lease until {{iso task.leaseExpiresAt}}){{/if}}{{else}}–{{/if}}</dd>
  {{#if task.availableAt}}<dt>Queued until</dt><dd>{{iso task.availableAt}}</dd>{{/if}}
  <dt>Attempts</dt><dd>attempt {{task.attempt}}, {{task.failedAttempts}} failed of at most {{task.maxAttempts}}{{#if task.resumable}} · resumable{{/if}}</dd>
  <dt>Trace id</dt><dd class="mono">{{#if traceId}}{{traceId}}{{else}}–{{/if}}</dd>
  <dt>Result</dt><dd>{{#if (isNull task.resultBytes)}}none yet{{else}}{{bytes task.resultBytes}}{{#if task.resultIsError}} (isError){{/if}}{{/if}}</dd>
  {{#if task.idempotencyKey}}<dt>Idempotency key</dt><dd class="mono">{{task.idempotencyKey}}</dd>{{/if}}
  {{#if task.redrivenFrom}}<dt>Redriven from</dt><dd><a class="mono" href="/admin/tasks/{{task.redrivenFrom}}">{{task.redrivenFrom}}</a></dd>{{/if}}
  {{#if redrivenAs.length}}<dt>Redriven as</dt><dd>{{#each redrivenAs}}<a class="mono" href="/admin/tasks/{{this}}">{{this}}</a> {{/each}}</dd>{{/if}}
  {{#if task.error}}<dt>Error</dt><dd>{{task.error.message}}</dd>{{/if}}
  {{#if task.lastError}}<dt>Last failed run</dt><dd>{{task.lastError.message}}</dd>{{/if}}
</dl>
<h2>Checkpoint</h2>
{{#if (isNull task.checkpointBytes)}}<p class="empty">No checkpoint saved.</p>{{else}}
<p>{{bytes task.checkpointBytes}}{{#if checkpointTruncated}} (first {{previewChars}} characters shown){{/if}}</p>
<pre class="json">{{task.checkpointPreview}}</pre>
{{/if}}
<h2>Timeline</h2>
{{#if auditOff}}<p class="hint">AUDIT_ENABLED is false: nothing is recorded.</p>{{/if}}
<table class="list timeline">
  <thead><tr><th>At</th><th>Event</th><th>Status</th><th>Attempt</th><th>Actor</th><th>Principal</th><th>Instance</th><th>Trace</th><th>Detail</th></tr></thead>
  <tbody>
  {{#each timeline}}
    <tr>
      <td><time datetime="{{iso at}}">{{iso at}}</time></td>
      <td>{{kind}}</td>
      <td>{{#if previousStatus}}{{previousStatus}} → {{/if}}{{status}}</td>
      <td>{{attempt}}</td>
      <td>{{actor}}</td>
      <td class="mono">{{principal}}</td>
      <td class="mono">{{short instanceId}}</td>
      <td class="mono">{{short traceId}}</td>
      <td class="mono small">{{json detail}}</td>
    </tr>
  {{else}}
    <tr><td colspan="9" class="empty">No audit rows for this task.</td></tr>
  {{/each}}
  </tbody>
</table>
{{#if timelineTruncated}}<p class="hint">The first {{timelineLimit}} events are shown; <code>npm run cli -- audit list --task {{task.id}}</code> lists all.</p>{{/if}}
{{/layout}}
`;
