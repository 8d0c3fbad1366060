/** /admin/instances: the service_instance table with leases held. */
export const INSTANCES_VIEW = `{{#> layout title="Instances" nav="instances"}}
<h1>Instances</h1>
<p>This page was served by <span class="mono">{{self.id}}</span>: role <strong>{{self.role}}</strong>,
readiness <strong class="status status-{{#if self.ready}}completed{{else}}failed{{/if}}">{{#if self.ready}}ready{{else}}not ready{{/if}}</strong>{{#each self.down}} · {{@key}}: {{this}}{{/each}}.</p>
<p class="hint">An instance is <em>silent</em> after three missed heartbeats ({{silentAfter}}); the janitor then
rescues its tasks. Instances stopped in the last hour are listed too.</p>
<table class="list">
  <thead><tr><th>Instance</th><th>State</th><th>Role</th><th>Host</th><th>PID</th><th>Version</th><th>Started</th><th>Heartbeat</th><th>Leases held</th></tr></thead>
  <tbody>
  {{#each instances}}
    <tr>
      <td class="mono">{{id}}{{#if self}} (this one){{/if}}</td>
      <td><span class="state state-{{state}}">{{state}}</span></td>
      <td>{{role}}</td>
      <td>{{hostname}}</td>
      <td>{{pid}}</td>
      <td>{{version}}</td>
      <td><time datetime="{{iso startedAt}}" title="{{iso startedAt}}">{{ago startedAt}}</time></td>
      <td><time datetime="{{iso heartbeatAt}}" title="{{iso heartbeatAt}}">{{ago heartbeatAt}}</time></td>
      <td>{{#if leases}}<a href="/admin/tasks?instance={{id}}">{{leases}}</a>{{else}}0{{/if}}</td>
    </tr>
  {{else}}
    <tr><td colspan="9" class="empty">No instance.</td></tr>
  {{/each}}
  </tbody>
</table>
{{/layout}}
`;
