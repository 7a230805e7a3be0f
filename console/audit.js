// The audit trail: filters by action, key and time, and keyset pages.
import { api, query, attempt } from './api.js';
import { h, field, select, table, failed } from './dom.js';

const actions = ['key.created', 'key.updated', 'key.rolled', 'key.revoked', 'key.banned', 'ban.lifted', 'keys.copied',
  'admin.created', 'admin.revoked', 'webhook.added', 'webhook.removed', 'webhook.rotated', 'webhook.enabled', 'webhook.disabled'];

let filters = { action: '', key: '', since: '' };
let pages = [''];

export async function render(root) {
  const action = select('action', [['', 'Any action'], ...actions.map((a) => [a, a])], filters.action);
  const key = h('input', { type: 'number', name: 'key', min: 1, value: filters.key, inputmode: 'numeric' });
  const since = h('input', { name: 'since', value: filters.since, placeholder: '7d, or 2026-11-01T00:00:00Z' });
  const list = h('div', { class: 'list' });
  const form = h('form', { class: 'filters', role: 'search' },
    field('Action', action), field('Key id', key), field('Since', since, 'A duration back from now, or a time'),
    h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    filters = { action: action.value, key: key.value, since: since.value.trim() };
    pages = [''];
    showPage(list);
  });
  root.append(h('h1', {}, 'Audit trail'), form, list);
  await showPage(list);
}

async function showPage(list) {
  const path = pages[pages.length - 1] || '/audit' + query(filters);
  let answer;
  await attempt(async () => { answer = await api('GET', path); }, (m) => list.replaceChildren(failed(m)));
  if (!answer) {
    return;
  }
  const rows = answer.data.map((ev) => [
    ev.id, ev.time.replace('T', ' ').replace('Z', ' UTC'), ev.action, ev.actor,
    ev.keyId ? h('a', { href: '#/keys/' + ev.keyId }, String(ev.keyId)) : (ev.address || '—'),
    h('code', { class: 'details' }, JSON.stringify(ev.details)),
  ]);
  const empty = Object.values(filters).some((v) => v !== '')
    ? 'No event matches these filters: widen them.'
    : 'No events yet: each change to a key, a token or a webhook endpoint is written here.';
  const nav = h('div', { class: 'pager' });
  if (pages.length > 1) {
    nav.append(h('button', { type: 'button', onclick: () => { pages = ['']; showPage(list); } }, 'First page'));
  }
  if (answer.next) {
    nav.append(h('button', { type: 'button', onclick: () => { pages.push(answer.next); showPage(list); } }, 'Next page'));
  }
  list.replaceChildren(table('Audit events, oldest first', ['Id', 'Time', 'Action', 'Actor', 'Key or address', 'Details'], rows, empty), nav);
}
