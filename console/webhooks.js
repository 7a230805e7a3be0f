// The webhook endpoints: state and last answer, add (the secret shown
// once), rotate, enable, send a test, and an endpoint's deliveries
// (#/webhooks?deliveries=ID), failed first, each attempt's error, with
// resend.
import { api, attempt } from './api.js';
import { h, field, when, num, table, secret, errorLine } from './dom.js';
import { submit } from './key.js';

export async function render(root, ctx) {
  const endpoints = (await api('GET', '/webhooks')).data;
  const deliveries = h('section', { class: 'deliveries', 'aria-label': 'Deliveries' });
  const rows = endpoints.map((e) => [
    e.id, h('span', { class: 'url' }, e.url), e.events.length ? e.events.join(', ') : 'every type',
    e.enabled ? 'enabled' : 'disabled', answer(e), when(e.created),
    h('div', { class: 'buttons' },
      h('button', { type: 'button', class: 'test', onclick: () => act(ctx, `/webhooks/${e.id}/test`, `A webhook.test event is queued for endpoint ${e.id}.`) }, 'Send test'),
      h('button', { type: 'button', class: 'show-deliveries', onclick: () => ctx.go('#/webhooks?deliveries=' + e.id) }, 'Deliveries'),
      h('button', { type: 'button', class: 'rotate', onclick: () => rotate(root, ctx, e.id) }, 'Rotate secret'),
      e.enabled ? null : h('button', { type: 'button', class: 'enable', onclick: () => act(ctx, `/webhooks/${e.id}/enable`, `Endpoint ${e.id} enabled.`) }, 'Enable')),
  ]);
  root.append(h('h1', {}, 'Webhooks'), addForm(root, ctx),
    table('Webhook endpoints', ['Id', 'URL', 'Events', 'State', 'Last answer', 'Added', 'Actions'], rows,
      'No webhook endpoints yet: add one above, and events are signed and sent to it.', [5]),
    deliveries);
  const shown = Number(ctx.params.get('deliveries'));
  if (endpoints.some((e) => e.id === shown)) {
    await showDeliveries(deliveries, ctx, shown);
  }
}

// got is an attempt's answer in words: its status, or why there was none
// (an error that only repeats the status is not said twice).
function got(x) {
  if (x.lastStatus == null) {
    return 'not tried yet';
  }
  if (x.lastStatus === 0) {
    return x.lastError || 'no answer';
  }
  return 'HTTP ' + x.lastStatus + (x.lastError && x.lastError !== 'status ' + x.lastStatus ? ` (${x.lastError})` : '');
}

function answer(e) {
  return e.lastStatus == null ? got(e) : `${got(e)} at ${when(e.lastAttempt)}`;
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
    h('span', { class: 'event-id' }, d.eventId), d.type, h('span', { class: 'state state-' + d.state }, d.state), num(d.attempts),
    h('span', { class: 'time' }, when(d.lastAttempt)), h('span', { class: 'last-error' }, d.lastError || got(d)),
    d.state === 'pending' ? when(d.nextAttempt) : '—',
    d.state === 'failed' ? h('button', { type: 'button', class: 'resend', onclick: () => resend(box, ctx, id, d.eventId) }, 'Resend') : '',
  ]);
  const head = h('div', { class: 'heading' }, h('h2', { tabindex: -1 }, `Deliveries to endpoint ${id}, failed first`),
    h('button', { type: 'button', class: 'refresh', onclick: () => showDeliveries(box, ctx, id) }, 'Refresh'));
  if (failed.data.length) {
    head.append(h('button', { type: 'button', class: 'resend-failed', onclick: () => resend(box, ctx, id) }, 'Resend every failed'));
  }
  box.replaceChildren(head, table('Deliveries', ['Event', 'Type', 'State', 'Attempt', 'Last attempt', 'Last answer', 'Next attempt', ''], rows,
    'No deliveries yet: “Send test” queues one.'),
  h('p', {}, 'A delivery that fails is tried again after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h: ' +
    'it is “failed” after its eighth attempt, about 28 hours after the first (at once on 410 Gone), and Resend appears then.'));
  box.querySelector('h2').focus({ preventScroll: true });
  box.scrollIntoView({ block: 'start' });
}

async function resend(box, ctx, id, eventId) {
  const body = eventId ? { eventId } : { failed: true };
  await attempt(async () => {
    const n = (await api('POST', `/webhooks/${id}/resend`, body)).data.queued;
    ctx.notify(`${n} queued again.`);
    await showDeliveries(box, ctx, id);
  }, ctx.notify);
}
