// The bans in force, a key's named ("tiny-bot (key 3)"), and lifting one
// behind a confirmation.
import { api } from './api.js';
import { h, when, table } from './dom.js';
import { lift } from './key.js';

export async function render(root, ctx) {
  const bans = (await api('GET', '/bans')).data;
  const named = await Promise.all(bans.map((b) => nameOf(b.subject)));
  const rows = bans.map((b, i) => {
    const m = /^key:(\d+)$/.exec(b.subject);
    const subject = m ? h('a', { href: '#/keys/' + m[1] }, named[i]) : named[i];
    const cells = [subject, when(b.since), when(b.until)];
    if (ctx.can('keys:write')) {
      cells.push(h('button', { type: 'button', class: 'lift', 'data-subject': b.subject, onclick: () => lift(ctx, b.subject, named[i]) }, 'Lift…'));
    }
    return cells;
  });
  const headers = ['Banned', 'Since', 'Until'];
  if (ctx.can('keys:write')) {
    headers.push('Action');
  }
  root.append(h('h1', {}, 'Bans'),
    h('p', {}, 'A key or a client address is banned for a while when it keeps sending while told to wait. A ban ends by itself at its end, or when lifted here. ' +
      'A key’s ban is its budget’s: the keys of a roll share it.'),
    table('Bans in force', headers, rows, 'No bans in force: nothing to do. A key that keeps knocking while limited shows here.'));
}

// nameOf is a ban's subject in words: a key by its name and id, an address
// as it is.
async function nameOf(subject) {
  const m = /^key:(\d+)$/.exec(subject);
  if (!m) {
    return subject.replace(/^address:/, 'address ');
  }
  try {
    const k = (await api('GET', '/keys/' + m[1])).data;
    return `${k.name || '(no name)'} (key ${k.id})`;
  } catch (e) {
    return `key ${m[1]}`;
  }
}
