/**
 * The frame of every console page (a Handlebars partial block). No inline script or style: the CSP allows
 * only the two files under /admin/assets/.
 */
export const LAYOUT_VIEW = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · MCP console</title>
<link rel="stylesheet" href="/admin/assets/console.css">
<script src="/admin/assets/console.js" defer></script>
</head>
<body>
<header class="top">
  <a class="brand" href="/admin/tasks">MCP console</a>
  <nav>
    <a href="/admin/tasks"{{#if (eq nav "tasks")}} aria-current="page"{{/if}}>Tasks</a>
    <a href="/admin/sessions"{{#if (eq nav "sessions")}} aria-current="page"{{/if}}>Sessions</a>
    <a href="/admin/instances"{{#if (eq nav "instances")}} aria-current="page"{{/if}}>Instances</a>
    <a href="/admin/janitor"{{#if (eq nav "janitor")}} aria-current="page"{{/if}}>Janitor</a>
    <a href="/admin/quotas"{{#if (eq nav "quotas")}} aria-current="page"{{/if}}>Quotas</a>
    <a href="/admin/queue"{{#if (eq nav "queue")}} aria-current="page"{{/if}}>Queue</a>
  </nav>
  {{#if operator}}<span class="who" title="{{operator.id}}">{{operator.label}}</span>{{/if}}
</header>
<main>
{{#if flash}}<p class="flash flash-{{flash.tone}}" role="status">{{flash.text}}</p>{{/if}}
{{> @partial-block }}
</main>
</body>
</html>
`;
