// The bans in force, and lifting one behind a confirmation.
import { api, attempt } from './api.js';
import { h, when, table, confirm } from './dom.js';

export async function render(root, ctx) {
  const bans = (await api('GET', '/bans')).data;
  const rows = bans.map((b) => {
    const m = /^key:(\d+)$/.exec(b.subject);
    const subject = m ? h('a', { href: '#/keys/' + m[1] }, b.subject) : b.subject;
    const cells = [subject, when(b.since), when(b.until)];
    if (ctx.can('keys:write')) {
      cells.push(h('button', { type: 'button', class: 'lift', 'data-subject': b.subject, onclick: () => lift(ctx, b.subject) }, 'Lift…'));
    }
    return cells;
  });
  const headers = ['Subject', 'Since', 'Until'];
  if (ctx.can('keys:write')) {
    headers.push('Action');
  }
  root.append(h('h1', {}, 'Bans'),
    h('p', {}, 'A key or a client address is banned for a while when it keeps sending while told to wait. A ban ends by itself at its end, or when lifted here.'),
    table('Bans in force', headers, rows, 'No bans in force: nothing to do. A key that keeps knocking while limited shows here.'));
}

async function lift(ctx, subject) {
  if (!await confirm(`Lift the ban of ${subject}? Its requests are let through again on every server within a second.`, 'Lift the ban')) {
    return;
  }
  await attempt(async () => {
    await api('DELETE', '/bans/' + encodeURIComponent(subject));
    window.dispatchEvent(new HashChangeEvent('hashchange'));
    ctx.notify(`The ban of ${subject} is lifted.`);
  }, ctx.notify);
}
