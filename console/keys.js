// The keys: search, filters, keyset pages, and a new key with its secret
// shown once.
import { api, query, attempt } from './api.js';
import { h, field, select, when, until, num, table, secret, errorLine, failed } from './dom.js';

export const plans = [['free', 'Free'], ['pro', 'Pro'], ['business', 'Business'], ['enterprise', 'Enterprise']];

// The filters are the hash's query (#/keys?q=tiny&plan=pro), with the
// page's cursor: the back button and a shared link show them again.
const filtersOf = (params) => Object.fromEntries(['q', 'plan', 'idle', 'expiring', 'revoked'].map((n) => [n, params.get(n) || '']));

export async function render(root, ctx) {
  const list = h('div', { class: 'list' });
  const heading = h('div', { class: 'heading' }, h('h1', {}, 'Keys'));
  if (ctx.can('keys:write')) {
    heading.append(h('button', { type: 'button', class: 'primary create-key', onclick: () => showCreate(root, ctx) }, 'Create key'));
  }
  const filters = filtersOf(ctx.params);
  root.append(heading, filterForm(filters, (f) => ctx.go('#/keys' + query(f))), list);
  await showPage(list, ctx, filters);
}

function filterForm(filters, apply) {
  const q = h('input', { type: 'search', name: 'q', value: filters.q, maxlength: 255, placeholder: 'name or externalId' });
  const plan = select('plan', [['', 'Any plan'], ...plans], filters.plan);
  const idle = h('input', { type: 'number', name: 'idle', min: 1, max: 400, value: filters.idle, inputmode: 'numeric' });
  const expiring = h('input', { type: 'number', name: 'expiring', min: 1, max: 400, value: filters.expiring, inputmode: 'numeric' });
  const revoked = select('revoked', [['', 'Any'], ['false', 'Not revoked'], ['true', 'Revoked only']], filters.revoked);
  const form = h('form', { class: 'filters', role: 'search' },
    field('Search', q), field('Plan', plan), field('Idle for days', idle), field('Expiring within days', expiring),
    field('Revoked', revoked), h('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    apply({ q: q.value.trim(), plan: plan.value, idle: idle.value, expiring: expiring.value, revoked: revoked.value });
  });
  return form;
}

// state is a key's state, or its ban in force: "banned until 14:05 UTC".
export function state(k) {
  if (k.ban && k.state !== 'revoked') {
    return h('span', { class: 'state state-banned', title: 'Banned until ' + when(k.ban.until) }, 'banned until ' + until(k.ban.until));
  }
  return h('span', { class: 'state state-' + k.state }, k.state);
}

// cursorOf is the cursor of an API page's path, for the hash of that page.
export function cursorOf(path) {
  return new URLSearchParams(path.split('?')[1] || '').get('cursor');
}

async function showPage(list, ctx, filters) {
  const cursor = ctx.params.get('cursor');
  const path = '/keys' + query({
    q: filters.q, plan: filters.plan, revoked: filters.revoked,
    idle: filters.idle && filters.idle + 'd', expiring: filters.expiring && filters.expiring + 'd', cursor,
  });
  let answer;
  await attempt(async () => { answer = await api('GET', path); }, (m) => list.replaceChildren(failed(m)));
  if (!answer) {
    return;
  }
  const rows = answer.data.map((k) => [
    k.id, h('a', { href: '#/keys/' + k.id }, k.name || '(no name)'), state(k), num(k.today), k.plan,
    num(k.perMinute), num(k.perDay), when(k.lastUsed), when(k.expires), k.externalId || '—',
  ]);
  let empty = 'No key matches these filters: clear them, or search another name.';
  if (!Object.values(filters).some((v) => v !== '')) {
    empty = ctx.can('keys:write') ? 'No keys yet: create one with “Create key”.'
      : 'No keys yet: a token with keys:write (or petstore keys create) makes the first.';
  }
  const nav = h('div', { class: 'pager' });
  if (cursor) {
    nav.append(h('button', { type: 'button', onclick: () => ctx.go('#/keys' + query(filters)) }, 'First page'));
  }
  if (answer.next) {
    nav.append(h('button', { type: 'button', onclick: () => ctx.go('#/keys' + query({ ...filters, cursor: cursorOf(answer.next) })) }, 'Next page'));
  }
  list.replaceChildren(
    table('Keys', ['Id', 'Name', 'State', 'Today', 'Plan', 'Per minute', 'Per day', 'Last used', 'Expires', 'External id'], rows, empty, [5, 6, 7, 8, 9]),
    nav);
}

// enterpriseOnly lets figures be typed only while plan is enterprise.
export function enterpriseOnly(plan, ...figures) {
  const sync = () => figures.forEach((f) => { f.disabled = plan.value !== 'enterprise'; });
  plan.addEventListener('change', sync);
  sync();
}

// scopeBoxes are the pet scopes as checkboxes, checked as given.
export function scopeBoxes(checked) {
  return h('fieldset', { class: 'scopes' }, h('legend', {}, 'Scopes'),
    ['pets:read', 'pets:write'].map((s) => h('label', { class: 'check' },
      h('input', { type: 'checkbox', name: 'scope', value: s, checked: checked.includes(s) }), s)));
}

export function checkedScopes(form) {
  return [...form.querySelectorAll('input[name=scope]:checked')].map((b) => b.value);
}

// numberOrNothing is a form's number, or undefined when left empty.
export function numberOrNothing(input) {
  return input.value === '' ? undefined : Number(input.value);
}

function showCreate(root, ctx) {
  const name = h('input', { name: 'name', maxlength: 64, required: true });
  const plan = select('plan', plans, 'free');
  const perMinute = h('input', { type: 'number', name: 'perMinute', min: 1 });
  const perDay = h('input', { type: 'number', name: 'perDay', min: 1 });
  const expires = h('input', { name: 'expires', placeholder: '90d or 2027-01-31T00:00:00Z' });
  const externalId = h('input', { name: 'externalId', maxlength: 255 });
  enterpriseOnly(plan, perMinute, perDay);
  const problem = errorLine();
  const form = h('form', { class: 'card create' },
    h('h2', {}, 'Create a key'),
    field('Name', name), field('Plan', plan),
    field('Per minute', perMinute, 'Enterprise only'), field('Per day', perDay, 'Enterprise only'),
    scopeBoxes(['pets:read', 'pets:write']),
    field('Expires', expires, 'Empty: never'), field('External id', externalId, 'Your own reference, optional'),
    problem,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create'),
      h('button', { type: 'button', onclick: () => form.remove() }, 'Cancel')));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { name: name.value, plan: plan.value, scopes: checkedScopes(form) };
    for (const [k, v] of [['perMinute', numberOrNothing(perMinute)], ['perDay', numberOrNothing(perDay)],
      ['expires', expires.value.trim() || undefined], ['externalId', externalId.value.trim() || undefined]]) {
      if (v !== undefined && !form.elements[k].disabled) {
        body[k] = v;
      }
    }
    problem.textContent = '';
    await attempt(async () => {
      const made = (await api('POST', '/keys', body)).data;
      form.replaceWith(secret(`Key ${made.id}, ${made.name}`, made.key, 'this key'));
      ctx.notify(`Key ${made.id} created.`);
      await showPage(root.querySelector('.list'), ctx, filtersOf(ctx.params));
    }, (m) => { problem.textContent = m; });
  });
  root.querySelector('.create, .secret')?.remove();
  root.querySelector('.heading').after(form);
  name.focus();
}
