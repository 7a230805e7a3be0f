// The console: sign-in, the pages the token's scopes allow, and the router
// (#/keys, #/keys/ID, #/bans, #/servers, #/audit, #/webhooks, #/backup; a search or a page is
// in the hash's query, #/keys?q=tiny, so that the back button and a shared
// link show it again).
import { api, token, whenSignedOut, ApiError } from './api.js';
import { h, failed } from './dom.js';
import * as keys from './keys.js';
import * as key from './key.js';
import * as bans from './bans.js';
import * as servers from './servers.js';
import * as audit from './audit.js';
import * as webhooks from './webhooks.js';
import * as backup from './backup.js';

const pages = [
  { path: 'keys', title: 'Keys', scope: 'keys:read', page: keys },
  { path: 'bans', title: 'Bans', scope: 'keys:read', page: bans },
  { path: 'servers', title: 'Servers', scope: 'keys:read', page: servers },
  { path: 'audit', title: 'Audit trail', scope: 'audit:read', page: audit },
  { path: 'webhooks', title: 'Webhooks', scope: 'webhooks', page: webhooks },
  { path: 'backup', title: 'Backup', scope: 'keys:read', page: backup },
];

const $ = (id) => document.getElementById(id);
let me = null; // the token's whoami, once signed in
let shown = null; // the hash of the page shown

function signedIn() {
  return me !== null;
}

// can tells whether the token holds scope.
function can(scope) {
  return me !== null && me.scopes.includes(scope);
}

function notify(message) {
  const n = $('notice');
  n.textContent = message;
  n.hidden = !message;
}

function showSignIn(reason) {
  me = null;
  $('nav').hidden = $('who').hidden = $('signout').hidden = true;
  $('nav').replaceChildren();
  $('page').replaceChildren();
  $('signin').hidden = false;
  $('signin-reason').textContent = reason || '';
  $('signin-reason').hidden = !reason;
  notify('');
  $('token').value = '';
  $('token').focus();
}

async function signIn(t) {
  token.set(t);
  try {
    me = (await api('GET', '/whoami')).data;
  } catch (e) {
    token.forget();
    showSignIn(e instanceof ApiError ? e.explain() : String(e));
    return;
  }
  $('signin').hidden = true;
  $('who').textContent = `${me.name} (${me.scopes.join(', ')})`;
  $('who').hidden = $('signout').hidden = false;
  const allowed = pages.filter((p) => can(p.scope));
  $('nav').replaceChildren(...allowed.map((p) => h('a', { href: '#/' + p.path, 'data-page': p.path }, p.title)));
  $('nav').hidden = false;
  if (allowed.length === 0) {
    $('page').replaceChildren(h('p', { class: 'empty' }, 'This token has no scope the console can show. Ask for a token with keys:read, audit:read or webhooks.'));
    return;
  }
  route();
}

function signOut() {
  token.forget();
  me = null;
  shown = null;
  history.replaceState(null, '', location.pathname);
  showSignIn('Signed out: the token is forgotten in this tab.');
}

// route shows the page the hash names, or the first the token may see.
async function route() {
  if (!signedIn()) {
    return;
  }
  const [path, search] = location.hash.replace(/^#\/?/, '').split('?');
  const [name, id] = path.split('/');
  const params = new URLSearchParams(search || '');
  const allowed = pages.filter((p) => can(p.scope));
  const entry = allowed.find((p) => p.path === name) || allowed[0];
  let page = entry.page;
  if (entry.path === 'keys' && id && /^\d+$/.test(id)) {
    page = key;
  }
  for (const a of $('nav').querySelectorAll('a')) {
    if (a.dataset.page === entry.path) {
      a.setAttribute('aria-current', 'page');
    } else {
      a.removeAttribute('aria-current');
    }
  }
  if (location.hash !== shown) {
    notify(''); // a message is about the page it was said on
    shown = location.hash;
  }
  const root = h('div', { class: 'page', 'data-page': page === key ? 'key' : entry.path });
  $('page').replaceChildren(root);
  try {
    await page.render(root, { can, notify, id, me, params, go });
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      return; // back at the sign-in, with the reason
    }
    root.append(failed(e instanceof ApiError ? e.explain() : String(e)));
  }
}

// go shows the page of hash, a step the back button goes back on; the
// same hash again is shown again.
function go(hash) {
  if (location.hash === hash) {
    route();
  } else {
    location.hash = hash;
  }
}

whenSignedOut((reason) => showSignIn(`Signed out: ${reason}.`));
window.addEventListener('hashchange', route);
$('signout').addEventListener('click', signOut);
$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const t = $('token').value.trim();
  if (t) {
    signIn(t);
  }
});
if (token.get()) {
  signIn(token.get());
} else {
  showSignIn('');
}
