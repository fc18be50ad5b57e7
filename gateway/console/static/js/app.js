// The console's shell: sign-in, the header (pages, connection, who is
// signed in), the router between pages, toasts and dialogs.

import { Api } from './api.js';
import { Store } from './store.js';
import { Session } from './session.js';
import { h, clear, setText, button } from './dom.js';
import { clock } from './fmt.js';
import * as fleetView from './views/fleet.js';
import * as boardView from './views/board.js';
import * as groupsView from './views/groups.js';
import * as showView from './views/show.js';
import * as firmwareView from './views/firmware.js';
import * as rolloutView from './views/rollout.js';
import * as eventsView from './views/events.js';
import * as tokensView from './views/tokens.js';
import * as installationView from './views/installation.js';
import * as dmxView from './views/dmx.js';
import * as signinView from './views/signin.js';

const api = new Api();
const store = new Store(api);
const session = new Session(api);

const PAGES = [
  { name: 'fleet', title: 'Fleet', re: /^#\/fleet$/, view: fleetView },
  { name: 'board', re: /^#\/board\/([^/]+)$/, view: boardView, nav: 'fleet' },
  { name: 'groups', title: 'Groups & scenes', re: /^#\/groups$/, view: groupsView },
  { name: 'show', title: 'Show', re: /^#\/show$/, view: showView },
  { name: 'firmware', title: 'Firmware', re: /^#\/firmware$/, view: firmwareView },
  { name: 'rollout', re: /^#\/rollout\/([^/]+)$/, view: rolloutView, nav: 'firmware' },
  { name: 'installation', title: 'Installation', re: /^#\/installation$/, view: installationView },
  { name: 'events', title: 'Events', re: /^#\/events$/, view: eventsView },
  { name: 'dmx', title: 'DMX', re: /^#\/dmx$/, view: dmxView },
  { name: 'tokens', title: 'Tokens', re: /^#\/tokens$/, view: tokensView, need: 'tokens' },
  { name: 'signin', re: /^#\/signin$/, view: signinView },
];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const conn = document.getElementById('conn');
const who = document.getElementById('who');
const banner = document.getElementById('banner');
const toasts = document.getElementById('toasts');

let current = null; // { page, handle }
let signedIn = false;

// ctx is what every page gets.
const ctx = {
  api, store, session,
  go(hash) { if (location.hash === hash) route(); else location.hash = hash; },
  toast,
  dialog,
  signedIn: () => signedIn,
  enter,
  signOut,
  // rolloutTarget carries a fleet selection to the rollout builder.
  rolloutTarget: null,
};

// toast shows a short message in the corner (it covers nothing that
// moves, so the page never jumps).
function toast(text, kind, ms) {
  const t = h('div', { class: 'toast ' + (kind || 'info'), role: kind === 'bad' ? 'alert' : 'status', text });
  toasts.appendChild(t);
  setTimeout(() => t.remove(), ms || 5000);
  while (toasts.children.length > 4) toasts.firstChild.remove();
}

// dialog opens a modal with a title, a body and buttons: [[label, fn,
// props]]; a button's fn returning false keeps the dialog open.
function dialog(title, body, buttons) {
  const d = h('dialog', { class: 'dlg', 'aria-label': title });
  const close = () => { d.close(); d.remove(); };
  const form = h('form', { method: 'dialog', on: { submit: (e) => { e.preventDefault(); const first = (buttons || [])[0]; if (first) run(first); } } },
    h('h2', { text: title }),
    h('div', { class: 'dlg-body' }, body),
    h('div', { class: 'dlg-buttons' },
      (buttons || []).map((b) => button(b[0], () => run(b), Object.assign({ class: 'primary' }, b[2] || {}))),
      button('Close', close, { class: 'ghost' })));
  async function run(b) {
    const keep = await b[1](d);
    if (keep !== false) close();
  }
  d.appendChild(form);
  d.addEventListener('close', () => d.remove());
  document.body.appendChild(d);
  d.showModal();
  return { el: d, close };
}

function renderNav(active) {
  clear(nav);
  if (!signedIn) return;
  for (const p of PAGES) {
    if (!p.title) continue;
    if (p.need && !session.can(p.need)) continue;
    nav.appendChild(h('a', { href: '#/' + p.name, text: p.title, class: active === p.name ? 'active' : '', 'aria-current': active === p.name ? 'page' : null }));
  }
}

function renderWho() {
  clear(who);
  if (!signedIn) return;
  who.appendChild(h('span', { class: 'who-name', text: session.name }));
  who.appendChild(h('span', { class: 'role role-' + session.role, text: session.role }));
  who.appendChild(button(api.token ? 'Sign out' : 'Sign in', () => signOut(), { class: 'ghost small' }));
}

function renderConn(st) {
  clear(conn);
  if (!signedIn) return;
  const labels = { live: 'live', down: 'reconnecting', connecting: 'connecting', denied: 'refused' };
  conn.className = 'conn conn-' + st.state;
  conn.appendChild(h('span', { class: 'dot', 'aria-hidden': 'true' }));
  conn.appendChild(h('span', { class: 'conn-text', text: labels[st.state] || st.state }));
  if (st.state === 'down') {
    banner.hidden = false;
    clear(banner);
    const secs = Math.max(0, Math.round((st.retryAt - Date.now()) / 1000));
    banner.appendChild(h('strong', { text: 'Disconnected from the gateway' }));
    banner.appendChild(h('span', { text: ` since ${clock(st.since)} (${st.error}). Retrying in ${secs} s, attempt ${st.attempt}; ` +
      (st.lastN ? `events after #${st.lastN} will be caught up on reconnect.` : 'the stream starts again on reconnect.') }));
  } else if (st.state === 'denied') {
    banner.hidden = false;
    clear(banner);
    banner.appendChild(h('strong', { text: 'The gateway refused the event stream. ' }));
    banner.appendChild(h('span', { text: st.error || '' }));
  } else {
    banner.hidden = true;
    if (st.state === 'live' && st.resumedFrom) toast(`Reconnected: caught up from event #${st.resumedFrom}.`, 'ok');
  }
}

store.on('status', renderConn);
store.on('gap', (g) => toast(`${g.count} events between #${g.from} and #${g.to} were no longer kept by the gateway; the board list was read again.`, 'warn', 10000));

function route() {
  const hash = location.hash || '#/fleet';
  if (!signedIn && hash !== '#/signin') {
    location.hash = '#/signin';
    return;
  }
  let page = PAGES[0], m = null;
  for (const p of PAGES) {
    m = p.re.exec(hash);
    if (m) { page = p; break; }
  }
  if (!m) { location.hash = '#/fleet'; return; }
  if (page.need && !session.can(page.need)) { location.hash = '#/fleet'; return; }
  if (current && current.handle && current.handle.unmount) current.handle.unmount();
  clear(main);
  renderNav(page.nav || page.name);
  document.title = (page.title || page.name) + ' · holofleet console';
  current = { page, handle: page.view.mount(main, ctx, m.slice(1).map(decodeURIComponent)) };
}

// enter signs in with the api's current token (none for demo mode):
// finds the role, reads the fleet, starts the stream. It throws the
// ApiError when the gateway refuses.
async function enter() {
  await Promise.all([session.identify(), store.loadBoards(), store.loadChannels()]);
  signedIn = true;
  api.onUnauthorized = () => {
    if (!signedIn) return;
    toast('The gateway no longer accepts this token; sign in again.', 'bad', 10000);
    signOut();
  };
  store.connect();
  renderWho();
  renderConn(store.status);
}

function signOut() {
  signedIn = false;
  api.setToken('');
  store.disconnect();
  session.role = '';
  renderWho();
  renderConn({ state: 'connecting' });
  banner.hidden = true;
  location.hash = '#/signin';
  route();
}

async function boot() {
  window.addEventListener('hashchange', route);
  // the skip link focuses the page (its href is not a route)
  document.querySelector('.skip').addEventListener('click', (e) => { e.preventDefault(); main.focus(); });
  setInterval(() => { if (store.status.state === 'down') renderConn(store.status); }, 1000);
  try {
    await enter();
    if (!location.hash || location.hash === '#/signin') location.hash = '#/fleet';
  } catch (e) {
    if (e.status !== 401 && e.status !== 403) {
      signinView.setMessage(e.text || e.message);
    } else if (api.token) {
      signinView.setMessage('The stored token was refused: ' + (e.text || e.message));
      api.setToken('');
    }
  }
  route();
}

boot();
