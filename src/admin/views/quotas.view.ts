/** /admin/quotas: refusals by quota, from this instance's counters, next to each limit. */
export const QUOTAS_VIEW = `{{#> layout title="Quotas" nav="quotas"}}
<h1>Quotas</h1>
<p class="hint">Refusals counted by this instance since it started (<code>mcp_quota_rejections_total</code>);
each instance counts its own, so sum them in Prometheus for the fleet.</p>
<table class="list">
  <thead><tr><th>Quota</th><th>Refusals</th><th>Limit</th><th>Setting</th></tr></thead>
  <tbody>
  {{#each quotas}}
    <tr{{#if refusals}} class="hit"{{/if}}><td>{{name}}</td><td>{{refusals}}</td><td>{{limit}}</td><td><code>{{setting}}</code></td></tr>
  {{/each}}
  </tbody>
</table>
{{/layout}}
`;
