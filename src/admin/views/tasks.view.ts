/** /admin/tasks: counts by status, the filter form, one keyset page of tasks. */
export const TASKS_VIEW = `{{#> layout title="Tasks" nav="tasks"}}
<h1>Tasks</h1>
<ul class="counts" data-live-counts="/admin/tasks/counts">
  {{#each counts}}
  <li><a class="status status-{{status}}" href="/admin/tasks?status={{status}}">{{status}}</a>
    <strong data-count="{{status}}">{{count}}{{#if atLeast}}+{{/if}}</strong></li>
  {{/each}}
</ul>
<p class="hint">Live counts are exact; finished ones are counted up to {{countBound}} ("+" past that). Refreshed every 5 s.</p>
<form class="filters" method="get" action="/admin/tasks">
  <label>Status
    <select name="status">
      <option value="">any</option>
      {{#each statuses}}<option value="{{this}}"{{#if (eq this ../filter.status)}} selected{{/if}}>{{this}}</option>{{/each}}
    </select>
  </label>
  <label>Tool <input name="tool" value="{{filter.tool}}" maxlength="200"></label>
  <label>Owner <input name="owner" value="{{filter.owner}}" maxlength="512"></label>
  <label>Instance <input name="instance" value="{{filter.instance}}" maxlength="36" placeholder="uuid"></label>
  <label>Newer than <input name="newer" value="{{filter.newer}}" maxlength="8" size="5" placeholder="1h"></label>
  <label>Older than <input name="older" value="{{filter.older}}" maxlength="8" size="5" placeholder="7d"></label>
  <button type="submit">Filter</button>
  <a href="/admin/tasks">Clear</a>
</form>
<table class="list">
  <thead><tr><th>Task</th><th>Status</th><th>Tool</th><th>Owner</th><th>Era</th><th>Created</th><th>Updated</th><th>Instance</th><th>Attempt</th><th>Message</th></tr></thead>
  <tbody>
  {{#each tasks}}
    <tr>
      <td><a class="mono" href="/admin/tasks/{{id}}">{{id}}</a></td>
      <td><span class="status status-{{status}}">{{status}}</span></td>
      <td>{{toolName}}</td>
      <td title="{{ownerId}}">{{#if ownerName}}{{ownerName}}{{else}}{{ownerId}}{{/if}}</td>
      <td>{{era}}</td>
      <td><time datetime="{{iso createdAt}}" title="{{iso createdAt}}">{{ago createdAt}}</time></td>
      <td><time datetime="{{iso lastUpdatedAt}}" title="{{iso lastUpdatedAt}}">{{ago lastUpdatedAt}}</time></td>
      <td class="mono">{{#if instanceId}}<a href="/admin/tasks?instance={{instanceId}}">{{short instanceId}}</a>{{else}}–{{/if}}</td>
      <td>{{attempt}}</td>
      <td>{{statusMessage}}</td>
    </tr>
  {{else}}
    <tr><td colspan="10" class="empty">No task matches.</td></tr>
  {{/each}}
  </tbody>
</table>
<nav class="pages">
  {{#if firstPage}}<a href="{{firstPage}}">First page</a>{{/if}}
  {{#if nextPage}}<a rel="next" href="{{nextPage}}">Next page</a>{{/if}}
</nav>
{{/layout}}
`;
