// The fleet's event stream, live, with filters; and the audit log for
// admins when the gateway keeps one (GET /v1/audit; a gateway without it
// answers 404 and the page says so).

import { h, clear, setText, button, select } from '../dom.js';
import { clock, oneLine, parseJSON, dateTime } from '../fmt.js';

const SHOWN = 500; // rows kept on the page
const ROW_PX = 26; // fixed row height (CSS .evlist li)

const filt = { types: new Set(['happening', 'state', 'online', 'offline', 'restarted']), system: false, q: '', paused: false };

export function mount(main, ctx) {
  const { store, session, api } = ctx;
  const typeBoxes = ['happening', 'state', 'online', 'offline', 'restarted'].map((t) => {
    const cb = h('input', { type: 'checkbox', id: 'ev-type-' + t, checked: filt.types.has(t) });
    cb.addEventListener('change', () => { if (cb.checked) filt.types.add(t); else filt.types.delete(t); rebuild(); });
    return h('label', { class: 'check', for: cb.id }, cb, ' ' + t);
  });
  const sys = h('input', { type: 'checkbox', id: 'ev-system', checked: filt.system });
  sys.addEventListener('change', () => { filt.system = sys.checked; rebuild(); });
  const q = h('input', { type: 'search', id: 'ev-q', placeholder: 'Board, kind or text…', value: filt.q, 'aria-label': 'Filter events' });
  q.addEventListener('input', () => { filt.q = q.value; rebuild(); });
  const pause = button(filt.paused ? 'Resume view' : 'Pause view', () => {
    filt.paused = !filt.paused;
    pause.textContent = filt.paused ? 'Resume view' : 'Pause view';
    pause.setAttribute('aria-pressed', String(filt.paused));
    if (!filt.paused) rebuild();
  }, { id: 'ev-pause', 'aria-pressed': String(filt.paused) });
  const count = h('span', { class: 'summary', role: 'status' });
  const list = h('ol', { class: 'evlist', id: 'ev-list' });
  const wrap = h('div', { class: 'ev-wrap' }, list);

  const auditBox = h('div', { id: 'audit' });
  main.appendChild(h('section', { class: 'page page-events' },
    h('h1', { text: 'Events' }),
    h('div', { class: 'toolbar' }, typeBoxes, h('label', { class: 'check', for: 'ev-system' }, sys, ' system reports'), q, pause, count),
    wrap,
    session.can('audit') ? h('section', { class: 'card wide' }, h('h2', { text: 'Audit log' }), auditBox) : null));

  function name(id) { const b = store.boards.get(id); return b ? (b.hostname || id) : id; }

  function passes(ev) {
    if (!filt.types.has(ev.type)) return false;
    if (!filt.system && ev.type === 'state' && ev.kind === 'system') return false;
    if (filt.q) {
      const s = filt.q.toLowerCase();
      const hay = (name(ev.board) + ' ' + ev.board + ' ' + ev.type + ' ' + (ev.kind || '') + ' ' + (ev.data || '') + ' ' + (ev.reason || '')).toLowerCase();
      if (!hay.includes(s)) return false;
    }
    return true;
  }

  function row(ev) {
    let text = '';
    if (ev.type === 'offline') text = ev.reason || '';
    else if (ev.data) text = oneLine(parseJSON(ev.data));
    return h('li', { class: 't-' + ev.type, dataset: { n: String(ev.n), board: ev.board } },
      h('span', { class: 'n', text: '#' + ev.n }),
      h('time', { text: clock(Date.parse(ev.time)) }),
      h('a', { href: '#/board/' + encodeURIComponent(ev.board), class: 'b', text: name(ev.board) }),
      h('span', { class: 'ty', text: ev.type }),
      h('span', { class: 'kind', text: ev.kind || '' }),
      h('span', { class: 'data', text }));
  }

  let shown = 0;
  function rebuild() {
    clear(list);
    const evs = [];
    for (let i = store.events.length - 1; i >= 0 && evs.length < SHOWN; i--) if (passes(store.events[i])) evs.push(store.events[i]);
    const frag = document.createDocumentFragment();
    for (const ev of evs) frag.appendChild(row(ev));
    list.appendChild(frag);
    shown = evs.length;
    setText(count, `${shown} shown · ${store.events.length} received since the page opened · stream at #${store.lastN}`);
    queue.length = 0;
  }

  // new events are put on screen once per frame, newest on top; when the
  // reader has scrolled down, the list keeps its place
  const queue = [];
  let raf = 0;
  function flush() {
    raf = 0;
    if (filt.paused || !queue.length) return;
    const frag = document.createDocumentFragment();
    for (let i = queue.length - 1; i >= 0; i--) frag.appendChild(row(queue[i]));
    const added = queue.length;
    queue.length = 0;
    const keep = wrap.scrollTop > 0;
    list.insertBefore(frag, list.firstChild);
    if (keep) wrap.scrollTop += added * ROW_PX;
    shown += added;
    while (shown > SHOWN) { list.lastChild.remove(); shown--; }
    setText(count, `${shown} shown · ${store.events.length} received since the page opened · stream at #${store.lastN}`);
  }
  const off = store.on('event', (ev) => {
    if (!passes(ev)) return;
    queue.push(ev);
    if (queue.length > SHOWN) queue.splice(0, queue.length - SHOWN);
    if (!raf) raf = requestAnimationFrame(flush);
  });

  async function loadAudit() {
    if (!session.can('audit')) return;
    clear(auditBox);
    auditBox.appendChild(h('p', { class: 'muted', text: 'Reading…' }));
    try {
      const r = await api.get('/v1/audit');
      const entries = Array.isArray(r) ? r : (r && (r.entries || r.records || r.items)) || [];
      clear(auditBox);
      if (!entries.length) { auditBox.appendChild(h('p', { class: 'muted', text: 'The audit log is empty.' })); return; }
      const cols = ['time', 'who', 'verb', 'resource', 'allowed', 'outcome'];
      auditBox.appendChild(h('div', { class: 'scroll' }, h('table', { class: 'grid audit' },
        h('thead', null, h('tr', null, [...cols, 'details'].map((c) => h('th', { text: c })))),
        h('tbody', null, entries.slice(0, 500).map((e) => {
          const rest = Object.assign({}, e);
          for (const c of cols) delete rest[c];
          const who = e.who && typeof e.who === 'object' ? `${e.who.name || ''} (${e.who.role || ''})` : e.who;
          return h('tr', null,
            h('td', { text: e.time ? dateTime(e.time) : '' }), h('td', { text: who == null ? '' : String(who) }),
            h('td', { text: e.verb == null ? '' : String(e.verb) }), h('td', { text: e.resource == null ? '' : String(e.resource) }),
            h('td', { text: e.allowed == null ? '' : String(e.allowed) }), h('td', { text: e.outcome == null ? '' : String(e.outcome) }),
            h('td', { class: 'data', text: oneLine(rest, 300) }));
        })))));
    } catch (e) {
      clear(auditBox);
      auditBox.appendChild(h('p', { class: 'muted', id: 'audit-missing', text: e.status === 404 || e.status === 501
        ? 'This gateway keeps no audit log (GET /v1/audit is not served).'
        : 'The audit log could not be read: ' + (e.text || e.message) }));
    }
  }

  rebuild();
  loadAudit();
  return { unmount() { off(); if (raf) cancelAnimationFrame(raf); } };
}
