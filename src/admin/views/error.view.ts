/** Any refusal or failure of a console route, as a page (never a stack or an internal message). */
export const ERROR_VIEW = `{{#> layout title=heading}}
<h1>{{status}} · {{heading}}</h1>
<p>{{message}}</p>
{{#if operator}}<p><a href="/admin/tasks">Back to the tasks</a></p>{{/if}}
{{/layout}}
`;
