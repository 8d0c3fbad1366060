/** /admin/sessions: live legacy sessions with an End session button each. */
export const SESSIONS_VIEW = `{{#> layout title="Sessions" nav="sessions"}}
<h1>Sessions</h1>
<form class="filters" method="get" action="/admin/sessions">
  <label>Owner <input name="owner" value="{{filter.owner}}" maxlength="512"></label>
  <button type="submit">Filter</button> <a href="/admin/sessions">Clear</a>
</form>
<p class="hint">Live 2025-11-25 sessions (2026-07-28 requests carry no session). Event streams: those with events
kept for resumption. This instance holds {{openStreams}} open SSE stream(s) now.</p>
<table class="list">
  <thead><tr><th>Session</th><th>Owner</th><th>Protocol</th><th>Client</th><th>Age</th><th>Last seen</th><th>Event streams</th><th></th></tr></thead>
  <tbody>
  {{#each sessions}}
    <tr>
      <td class="mono">{{id}}</td>
      <td class="mono"><a href="/admin/tasks?owner={{url principalId}}">{{principalId}}</a></td>
      <td>{{protocolVersion}}</td>
      <td>{{clientName}}</td>
      <td><time datetime="{{iso createdAt}}" title="{{iso createdAt}}">{{ago createdAt}}</time></td>
      <td><time datetime="{{iso lastSeenAt}}" title="{{iso lastSeenAt}}">{{ago lastSeenAt}}</time></td>
      <td>{{eventStreams}}</td>
      <td><form method="post" action="/admin/sessions/{{url id}}/end">
        <input type="hidden" name="_csrf" value="{{../csrf}}">
        <button type="submit" class="danger">End session</button>
      </form></td>
    </tr>
  {{else}}
    <tr><td colspan="8" class="empty">No live session.</td></tr>
  {{/each}}
  </tbody>
</table>
<nav class="pages">
  {{#if firstPage}}<a href="{{firstPage}}">First page</a>{{/if}}
  {{#if nextPage}}<a rel="next" href="{{nextPage}}">Next page</a>{{/if}}
</nav>
{{/layout}}
`;
