// The audit trail, newest first: filters by action, key and time, keyset
// pages, all in the hash's query (#/audit?action=key.updated); key names
// beside their ids, and the details as labelled fields.
import { api, query, attempt } from './api.js';
import { h, field, select, num, table, failed } from './dom.js';
import { cursorOf } from './keys.js';

const actions = ['key.created', 'key.updated', 'key.rolled', 'key.revoked', 'key.banned', 'ban.lifted', 'keys.copied',
  'admin.created', 'admin.revoked', 'webhook.added', 'webhook.removed', 'webhook.rotated', 'webhook.enabled', 'webhook.disabled'];

export async function render(root, ctx) {
  const filters = Object.fromEntries(['action', 'key', 'since'].map((n) => [n, ctx.params.get(n) || '']));
  const action = select('action', [['', 'Any action'], ...actions.map((a) => [a, a])], filters.action);
  const key = h('input', { type: 'number', name: 'key', min: 1, value: filters.key, inputmode: 'numeric' });
  const since = h('input', { name: 'since', value: filters.since, placeholder: '7d, or 2026-11-01T00:00:00Z' });
  const list = h('div', { class: 'list' });
  const form = h('form', { class: 'filters', role: 'search' },
    field('Action', action), field('Key id', key), field('Since', since, 'A duration back from now, or a time'),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    ctx.go('#/audit' + query({ action: action.value, key: key.value, since: since.value.trim() }));
  });
  root.append(h('h1', {}, 'Audit trail'), form, list);
  await showPage(list, ctx, filters);
}

async function showPage(list, ctx, filters) {
  const cursor = ctx.params.get('cursor');
  let answer;
  await attempt(async () => { answer = await api('GET', '/audit' + query({ ...filters, order: 'newest', cursor })); },
    (m) => list.replaceChildren(failed(m)));
  if (!answer) {
    return;
  }
  const names = await namesOf(ctx, answer.data);
  const rows = answer.data.map((ev) => [
    h('span', { class: 'time' }, ev.time.replace('T', ' ').replace(/(\.\d+)?Z$/, '')), ev.action, ev.actor,
    subject(names, ev), details(ev.details || {}), ev.id,
  ]);
  const empty = Object.values(filters).some((v) => v !== '')
    ? 'No event matches these filters: widen them.'
    : 'No events yet: each change to a key, a token or a webhook endpoint is written here.';
  const nav = h('div', { class: 'pager' });
  if (cursor) {
    nav.append(h('button', { type: 'button', onclick: () => ctx.go('#/audit' + query(filters)) }, 'Newest'));
  }
  if (answer.next) {
    nav.append(h('button', { type: 'button', onclick: () => ctx.go('#/audit' + query({ ...filters, cursor: cursorOf(answer.next) })) }, 'Older'));
  }
  list.replaceChildren(table('Audit events, newest first', ['Time (UTC)', 'Action', 'Actor', 'Key or address', 'Details', 'Id'], rows, empty, [5]), nav);
}

// namesOf are the names of the events' keys: now, with keys:read, else as
// the events last gave them.
async function namesOf(ctx, events) {
  const names = new Map();
  for (const ev of events.slice().reverse()) {
    if (ev.keyId && ev.details && ev.details.name && ev.action !== 'key.rolled') {
      names.set(ev.keyId, ev.details.name);
    }
  }
  if (ctx.can('keys:read')) {
    const ids = [...new Set(events.flatMap((ev) => [ev.keyId, ev.newKeyId]).filter(Boolean))];
    await Promise.all(ids.map(async (id) => {
      try {
        names.set(id, (await api('GET', '/keys/' + id)).data.name);
      } catch (e) {
        // a key gone from this environment keeps the name its events gave
      }
    }));
  }
  return names;
}

function keyLink(names, id) {
  const name = names.get(id);
  return h('a', { href: '#/keys/' + id }, name ? `${name} (key ${id})` : `key ${id}`);
}

function subject(names, ev) {
  if (!ev.keyId) {
    return ev.address || '—';
  }
  return ev.newKeyId ? [keyLink(names, ev.keyId), ' → ', keyLink(names, ev.newKeyId)] : keyLink(names, ev.keyId);
}

// details are an event's details as labelled fields; a change shows only
// what changed, "plan: pro → enterprise".
function details(d) {
  let pairs = Object.entries(d).filter(([k]) => k !== 'before' && k !== 'after').map(([k, v]) => [k, shown(v)]);
  if (d.before && d.after) {
    const fields = [...new Set([...Object.keys(d.before), ...Object.keys(d.after)])];
    pairs = pairs.concat(fields.filter((k) => shown(d.before[k]) !== shown(d.after[k]))
      .map((k) => [k, `${shown(d.before[k])} → ${shown(d.after[k])}`]));
  }
  if (pairs.length === 0) {
    return '—';
  }
  return h('ul', { class: 'pairs' }, pairs.map(([k, v]) => h('li', {}, h('span', { class: 'label' }, k + ': '), v)));
}

function shown(v) {
  if (v == null || v === '') {
    return '—';
  }
  if (Array.isArray(v)) {
    return v.join(', ');
  }
  if (typeof v === 'object') {
    return Object.entries(v).map(([k, x]) => `${k} ${shown(x)}`).join(', ');
  }
  if (typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v)) {
    return v.replace('T', ' ').replace(/(\.\d+)?Z$/, ' UTC');
  }
  return String(num(v));
}
