// One key: its facts, its limits now, its usage by day (a chart and a
// table), and, with keys:write, edit, roll and revoke.
import { api, attempt } from './api.js';
import { h, field, select, when, until, num, table, secret, confirm, errorLine } from './dom.js';
import { plans, scopeBoxes, checkedScopes, numberOrNothing, state, enterpriseOnly } from './keys.js';
import { drawUsage, series } from './chart.js';

export async function render(root, ctx) {
  const k = (await api('GET', '/keys/' + ctx.id)).data;
  root.append(h('p', {}, h('a', { href: '#/keys' }, '← All keys')),
    h('h1', {}, `Key ${k.id}: `, h('span', { class: 'key-name' }, k.name || '(no name)')),
    facts(k));
  const limits = h('section', { class: 'limits', 'aria-label': 'Limits now' });
  const usage = h('section', { class: 'usage', 'aria-label': 'Usage' });
  root.append(limits, usage);
  if (ctx.can('keys:write')) {
    root.append(actions(root, ctx, k));
  }
  await Promise.all([showLimits(limits, ctx, k.id), showUsage(usage, k.id, 30)]);
}

function facts(k) {
  const rows = [
    ['Plan', k.plan], ['Per minute', num(k.perMinute)], ['Per day', num(k.perDay)], ['State', state(k)],
    ['Scopes', k.scopes.join(', ')], ['Created', when(k.created)], ['Expires', when(k.expires)],
    ['Revoked', when(k.revoked)], ['Last used', when(k.lastUsed)], ['Today', num(k.today)],
    ['External id', k.externalId || '—'],
    ['Rolled to', k.rolledTo ? h('a', { href: '#/keys/' + k.rolledTo }, 'key ' + k.rolledTo) : '—'],
    ['Rolled from', k.rolledFrom ? h('a', { href: '#/keys/' + k.rolledFrom }, 'key ' + k.rolledFrom) : '—'],
  ];
  return h('dl', { class: 'facts' }, rows.map(([t, d]) => [h('dt', {}, t), h('dd', {}, d)]));
}

async function showLimits(box, ctx, id) {
  const l = (await api('GET', `/keys/${id}/limits`)).data;
  const win = (name, w) => h('div', { class: 'window' },
    h('h3', {}, name),
    h('meter', { min: 0, max: w.limit, value: w.remaining, 'aria-label': `${name}: remaining` }),
    h('p', {}, `${num(w.remaining)} of ${num(w.limit)} left, full again at ${when(new Date(w.reset * 1000).toISOString())}`));
  box.replaceChildren(h('h2', {}, 'Limits now'), ...banned(ctx, l.ban), h('div', { class: 'windows' }, win('This minute', l.minute), win('Today (UTC)', l.day)));
}

// banned says a key's ban in force, with a Lift button for keys:write.
function banned(ctx, ban) {
  if (!ban) {
    return [];
  }
  const box = h('div', { class: 'ban', role: 'status' },
    h('p', {}, h('strong', {}, `Banned until ${until(ban.until)}`), ` (since ${when(ban.since)}): it kept sending while told to wait, ` +
      'so every request with this key, and with the other keys of its roll, is refused until then.'));
  if (ctx.can('keys:write')) {
    box.append(h('button', { type: 'button', class: 'danger lift', onclick: () => lift(ctx, ban.subject) }, 'Lift the ban…'));
  }
  return [box];
}

// lift lifts the ban of subject behind a confirmation, then shows the page again.
export async function lift(ctx, subject, name = subject) {
  if (!await confirm(`Lift the ban of ${name}? Its requests are let through again on every server within a second.`, 'Lift the ban')) {
    return;
  }
  await attempt(async () => {
    await api('DELETE', '/bans/' + encodeURIComponent(subject));
    window.dispatchEvent(new HashChangeEvent('hashchange'));
    ctx.notify(`The ban of ${name} is lifted.`);
  }, ctx.notify);
}

async function showUsage(box, id, days) {
  const rows = (await api('GET', `/keys/${id}/usage?days=${days}`)).data;
  const choose = select('days', [['30', '30 days'], ['90', '90 days'], ['400', '400 days']], String(days));
  choose.addEventListener('change', () => showUsage(box, id, Number(choose.value)));
  const chart = h('div', { class: 'chart' });
  const readout = h('p', { class: 'readout', 'aria-live': 'polite' }, 'Point at a day, or focus the chart and use the arrow keys, for its numbers.');
  const total = rows.reduce((n, r) => n + series.reduce((m, s) => m + r[s.name], 0), 0);
  const legend = h('ul', { class: 'legend' }, series.map((s) => h('li', {}, h('span', { class: 'swatch ' + s.name }), s.label)));
  const tableRows = rows.slice().reverse().map((r) => [r.day, ...series.map((s) => num(r[s.name])), num(series.reduce((n, s) => n + r[s.name], 0))]);
  const empty = total === 0 ? [h('p', { class: 'empty' }, `No requests with this key in the last ${days} days: send one to /v1 with it, and it shows here within seconds.`)] : [];
  box.replaceChildren(
    h('div', { class: 'heading' }, h('h2', {}, 'Usage by day'), field('Show', choose)),
    ...empty, legend, chart, readout,
    h('details', {}, h('summary', {}, 'The same as a table'),
      table(`Usage of the last ${days} days, newest first`, ['Day', ...series.map((s) => s.label), 'Total'], tableRows, 'No days.')));
  drawUsage(chart, rows, readout);
}

function actions(root, ctx, k) {
  const box = h('section', { class: 'key-actions', 'aria-label': 'Change this key' }, h('h2', {}, 'Change this key'));
  if (k.state === 'revoked') {
    box.append(h('p', {}, 'This key is revoked: nothing more can be done with it.'));
    return box;
  }
  box.append(editForm(ctx, k), rollForm(root, ctx, k),
    h('div', { class: 'card' }, h('h3', {}, 'Revoke'),
      h('p', {}, 'Revoking is at once and for good: every request with the key is refused.'),
      h('button', { type: 'button', class: 'danger revoke', onclick: () => revoke(ctx, k) }, 'Revoke…')));
  return box;
}

function editForm(ctx, k) {
  const name = h('input', { name: 'name', maxlength: 64, value: k.name });
  const plan = select('plan', plans, k.plan);
  const perMinute = h('input', { type: 'number', name: 'perMinute', min: 1, value: k.perMinute });
  const perDay = h('input', { type: 'number', name: 'perDay', min: 1, value: k.perDay });
  const expires = h('input', { name: 'expires', placeholder: '90d, an RFC 3339 time, or never', value: k.expires || '' });
  const externalId = h('input', { name: 'externalId', maxlength: 255, value: k.externalId || '' });
  enterpriseOnly(plan, perMinute, perDay);
  const problem = errorLine();
  const form = h('form', { class: 'card edit' }, h('h3', {}, 'Edit'),
    field('Name', name), field('Plan', plan), field('Per minute', perMinute, 'Enterprise only'),
    field('Per day', perDay, 'Enterprise only'), scopeBoxes(k.scopes), field('Expires', expires, 'never: no end'),
    field('External id', externalId, 'Empty: none'),
    problem, h('button', { type: 'submit', class: 'primary' }, 'Save'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { name: name.value, plan: plan.value, scopes: checkedScopes(form) };
    if (plan.value === 'enterprise') {
      body.perMinute = numberOrNothing(perMinute);
      body.perDay = numberOrNothing(perDay);
    }
    const ends = expires.value.trim();
    if (ends === 'never' || ends === '') {
      body.expires = null;
    } else if (ends !== (k.expires || '')) {
      body.expires = ends;
    }
    if (externalId.value.trim() !== (k.externalId || '')) {
      body.externalId = externalId.value.trim() || null;
    }
    await submit(problem, ctx, async () => {
      await api('PATCH', '/keys/' + k.id, body);
      ctx.notify(`Key ${k.id} saved.`);
      window.dispatchEvent(new HashChangeEvent('hashchange'));
    });
  });
  return form;
}

function rollForm(root, ctx, k) {
  const overlap = h('input', { name: 'overlap', value: '24h' });
  const problem = errorLine();
  const form = h('form', { class: 'card roll' }, h('h3', {}, 'Roll'),
    h('p', {}, 'A new key with the same terms and budget; the old one works on through the overlap.'),
    field('Overlap', overlap, 'How long the old key keeps working: 24h, 7d'),
    problem, h('button', { type: 'submit' }, 'Roll'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    await submit(problem, ctx, async () => {
      const made = (await api('POST', `/keys/${k.id}/roll`, { overlap: overlap.value.trim() })).data;
      form.replaceWith(secret(`Key ${made.id}, the roll of key ${k.id}`, made.key, 'the new key'));
      ctx.notify(`Key ${k.id} rolled to key ${made.id}.`);
    });
  });
  return form;
}

async function revoke(ctx, k) {
  if (!await confirm(`Revoke key ${k.id} (${k.name || 'no name'})? Every request with it is refused at once, for good.`, 'Revoke')) {
    return;
  }
  await attempt(async () => {
    await api('POST', `/keys/${k.id}/revoke`);
    ctx.notify(`Key ${k.id} revoked.`);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  }, ctx.notify);
}

// submit runs a form's request, showing its error beside it.
export async function submit(problem, ctx, run) {
  problem.textContent = '';
  await attempt(run, (m) => { problem.textContent = m; });
}
