/**
 * The console's only stylesheet and only script, served from /admin/assets/ (no CDN, nothing inline). The
 * script is optional: without it every page works, it only refreshes the task counts in place.
 */
export const CONSOLE_CSS = `
:root { --fg: #1d232b; --muted: #5d6b7a; --line: #d9dee4; --bg: #f6f7f9; --accent: #1f5fbf; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header.top { display: flex; gap: 24px; align-items: center; padding: 10px 24px; background: #17202b; color: #fff; }
header.top a { color: #cfd8e3; text-decoration: none; }
header.top a[aria-current="page"], header.top a:hover { color: #fff; text-decoration: underline; }
header.top nav { display: flex; gap: 16px; flex: 1; }
.brand { font-weight: 700; color: #fff !important; }
.who { color: #cfd8e3; font-size: 13px; }
main { padding: 16px 24px 40px; }
h1 { font-size: 20px; margin: 4px 0 12px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
a { color: var(--accent); }
.mono, code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12.5px; }
.small { font-size: 11.5px; max-width: 420px; overflow-wrap: anywhere; }
.hint { color: var(--muted); font-size: 12.5px; }
.empty { color: var(--muted); text-align: center; padding: 16px; }
table.list { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid var(--line); }
table.list th, table.list td { padding: 6px 8px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
table.list th { background: #eef1f4; font-weight: 600; font-size: 12.5px; }
tr.hit td { background: #fff4e0; }
.counts { display: flex; gap: 12px; list-style: none; padding: 0; margin: 0 0 4px; flex-wrap: wrap; }
.counts li { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; display: flex; gap: 8px; align-items: center; }
.status, .state { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; background: #e3e7ec; color: var(--fg); text-decoration: none; }
.status-working { background: #dbe8fb; } .status-input_required { background: #fbefd0; }
.status-completed, .state-alive { background: #d8f1df; } .status-failed, .state-silent { background: #f8d9d9; }
.status-cancelled, .state-stopped { background: #e6e1f3; }
form.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin: 12px 0; padding: 10px; background: #fff; border: 1px solid var(--line); }
form.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 2px; }
input, select, button { font: inherit; padding: 4px 6px; }
button { cursor: pointer; border: 1px solid #9fb0c4; background: #fff; border-radius: 4px; padding: 5px 12px; }
button.danger { border-color: #c0392b; color: #a52a1e; }
.actions { display: flex; gap: 10px; margin: 8px 0 16px; }
.actions form { margin: 0; }
dl.facts { display: grid; grid-template-columns: 160px 1fr; gap: 4px 12px; background: #fff; border: 1px solid var(--line); padding: 12px; margin: 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
pre.json { background: #fff; border: 1px solid var(--line); padding: 10px; max-height: 360px; overflow: auto; }
.flash { padding: 8px 12px; border-radius: 4px; margin: 0 0 12px; }
.flash-ok { background: #d8f1df; } .flash-warn { background: #fbefd0; }
nav.pages { display: flex; gap: 16px; margin-top: 10px; }
`;

export const CONSOLE_JS = `'use strict';
// Refreshes the task counts of /admin/tasks in place every 5 s (the page works without this script).
(function () {
  var list = document.querySelector('[data-live-counts]');
  if (!list || !window.fetch) return;
  var url = list.getAttribute('data-live-counts');
  function refresh() {
    fetch(url, { headers: { accept: 'application/json' }, credentials: 'same-origin' })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (body) {
        if (!body || !body.counts) return;
        body.counts.forEach(function (c) {
          var el = list.querySelector('[data-count="' + c.status + '"]');
          if (el) el.textContent = String(c.count) + (c.atLeast ? '+' : '');
        });
      })
      .catch(function () {});
  }
  setInterval(refresh, 5000);
})();
`;
