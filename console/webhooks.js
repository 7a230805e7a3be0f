// The webhook endpoints: state and last answer, add (the secret shown
// once), rotate, enable, send a test, and the deliveries, failed first, with
// resend.
import { api, attempt } from './api.js';
import { h, field, when, table, secret, errorLine } from './dom.js';
import { submit } from './key.js';

export async function render(root, ctx) {
  const endpoints = (await api('GET', '/webhooks')).data;
  const deliveries = h('section', { class: 'deliveries', 'aria-label': 'Deliveries' });
  const rows = endpoints.map((e) => [
    e.id, h('span', { class: 'url' }, e.url), e.events.length ? e.events.join(', ') : 'every type',
    e.enabled ? 'enabled' : 'disabled', answer(e), when(e.created),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'test', onclick: () => act(ctx, `/webhooks/${e.id}/test`, `A webhook.test event is queued for endpoint ${e.id}.`) }, 'Send test'),
      h('button', { type: 'button', class: 'show-deliveries', onclick: () => showDeliveries(deliveries, ctx, e.id) }, 'Deliveries'),
      h('button', { type: 'button', class: 'rotate', onclick: () => rotate(root, ctx, e.id) }, 'Rotate secret'),
      e.enabled ? null : h('button', { type: 'button', class: 'enable', onclick: () => act(ctx, `/webhooks/${e.id}/enable`, `Endpoint ${e.id} enabled.`) }, 'Enable')),
  ]);
  root.append(h('h1', {}, 'Webhooks'), addForm(root, ctx),
    table('Webhook endpoints', ['Id', 'URL', 'Events', 'State', 'Last answer', 'Added', 'Actions'], rows,
      'No webhook endpoints yet: add one above, and events are signed and sent to it.'),
    deliveries);
}

function answer(e) {
  if (e.lastStatus == null) {
    return 'not tried yet';
  }
  const got = e.lastStatus === 0 ? 'no answer' : 'HTTP ' + e.lastStatus;
  return `${got} at ${when(e.lastAttempt)}` + (e.lastError ? ` (${e.lastError})` : '');
}

function addForm(root, ctx) {
  const url = h('input', { type: 'url', name: 'url', required: true, placeholder: 'https://hooks.example.com/petstore' });
  const events = h('input', { name: 'events', placeholder: 'key.quota.threshold, key.expiring' });
  const problem = errorLine();
  const form = h('form', { class: 'card add-webhook' }, h('h2', {}, 'Add an endpoint'),
    field('URL', url), field('Events', events, 'Separated by commas; empty: every type'), problem,
    h('button', { type: 'submit', class: 'primary' }, 'Add'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const body = { url: url.value.trim() };
    const types = events.value.split(',').map((s) => s.trim()).filter(Boolean);
    if (types.length) {
      body.events = types;
    }
    await submit(problem, ctx, async () => {
      const made = (await api('POST', '/webhooks', body)).data;
      await reload(root, ctx);
      root.querySelector('h1').after(secret(`The secret of endpoint ${made.id}`, made.secret, 'this signing secret'));
      ctx.notify(`Endpoint ${made.id} added.`);
    });
  });
  return form;
}

async function reload(root, ctx) {
  root.replaceChildren();
  await render(root, ctx);
}

async function act(ctx, path, done) {
  await attempt(async () => {
    await api('POST', path);
    ctx.notify(done);
  }, ctx.notify);
}

async function rotate(root, ctx, id) {
  await attempt(async () => {
    const made = (await api('POST', `/webhooks/${id}/rotate`)).data;
    await reload(root, ctx);
    root.querySelector('h1').after(secret(`The new secret of endpoint ${id}`, made.secret, 'this signing secret'));
    ctx.notify(`Endpoint ${id} has a new secret; the old one still signs during the overlap.`);
  }, ctx.notify);
}

async function showDeliveries(box, ctx, id) {
  const [failed, all] = await Promise.all([
    api('GET', `/webhooks/${id}/deliveries?failed=true&limit=100`), api('GET', `/webhooks/${id}/deliveries?limit=100`)]);
  const seen = new Set(failed.data.map((d) => d.eventId));
  const list = [...failed.data, ...all.data.filter((d) => !seen.has(d.eventId))];
  const rows = list.map((d) => [
    d.eventId, d.type, h('span', { class: 'state state-' + d.state }, d.state), d.attempts,
    d.lastStatus == null ? '—' : (d.lastStatus === 0 ? 'no answer' : d.lastStatus), when(d.lastAttempt), when(d.nextAttempt),
    d.state === 'failed' ? h('button', { type: 'button', class: 'resend', onclick: () => resend(box, ctx, id, d.eventId) }, 'Resend') : '',
  ]);
  const head = h('div', { class: 'heading' }, h('h2', { tabindex: -1 }, `Deliveries to endpoint ${id}, failed first`),
    h('button', { type: 'button', class: 'refresh', onclick: () => showDeliveries(box, ctx, id) }, 'Refresh'));
  if (failed.data.length) {
    head.append(h('button', { type: 'button', class: 'resend-failed', onclick: () => resend(box, ctx, id) }, 'Resend every failed'));
  }
  box.replaceChildren(head, table('Deliveries', ['Event', 'Type', 'State', 'Attempts', 'Last answer', 'Last attempt', 'Next attempt', ''], rows,
    'No deliveries yet: “Send test” queues one.'));
  box.querySelector('h2').focus();
}

async function resend(box, ctx, id, eventId) {
  const body = eventId ? { eventId } : { failed: true };
  await attempt(async () => {
    const n = (await api('POST', `/webhooks/${id}/resend`, body)).data.queued;
    ctx.notify(`${n} queued again.`);
    await showDeliveries(box, ctx, id);
  }, ctx.notify);
}
