// Show: run a cue list (gateway/cue, docs/show.md). A big GO fires the
// standby cue; the standby cue's number, name and notes are large; the
// running cues count down to their moment; the space bar is GO. Nothing
// asks for confirmation: a show has no time for dialogs. The page follows
// the cue lists' events (GET /v1/cuelists/events, Server-Sent Events):
// each carries its list's whole state, so nothing is polled; the state is
// read once when the page opens and again whenever the stream (re)connects
// (the gateway keeps no past cue events to replay). The remaining times
// count down between events.

import { h, clear, setText, button, toggleClass } from '../dom.js';
import { clock } from '../fmt.js';
import { EventStream } from '../stream.js';

const TICK_MS = 100; // the countdown of running cues
let chosen = ''; // the list shown, kept across page changes

export function mount(main, ctx) {
  const { api, session, toast } = ctx;
  const canGo = session.can('act');
  const pick = h('select', { id: 'show-list', 'aria-label': 'Cue list', on: { change: () => { chosen = pick.value; load(); } } });
  const number = h('div', { class: 'show-number', id: 'show-standby' });
  const name = h('div', { class: 'show-name', id: 'show-standby-name' });
  const notes = h('div', { class: 'show-notes', id: 'show-notes' });
  const goBtn = button('GO', () => act('go'), { class: 'primary show-go', id: 'show-go', disabled: !canGo, title: 'GO: fire the standby cue (space bar)' });
  const running = h('ol', { class: 'show-running', id: 'show-running', 'aria-live': 'polite' });
  const last = h('p', { class: 'muted', id: 'show-last' });
  const tc = h('p', { class: 'muted', id: 'show-timecode' });
  const live = h('span', { class: 'muted', id: 'show-stream', text: 'connecting…' });
  const cues = h('tbody');
  const page = h('section', { class: 'page page-show' },
    h('div', { class: 'row show-head' }, h('h1', { text: 'Show' }), pick, live),
    h('div', { class: 'show-grid' },
      h('div', { class: 'card show-standby' }, h('h2', { text: 'Standby' }), number, name, notes),
      h('div', { class: 'card show-controls' },
        goBtn,
        h('div', { class: 'row' },
          button('Stop', () => act('stop'), { class: 'ghost', id: 'show-stop', disabled: !canGo, title: 'STOP every wait and follow' }),
          button('Back', () => act('back'), { class: 'ghost', id: 'show-back', disabled: !canGo, title: 'standby one cue back' })),
        canGo ? h('p', { class: 'muted', text: 'Space bar: GO. No confirmations.' })
          : h('p', { class: 'muted', text: 'Running the show needs an operator; this page follows it.' })),
      h('div', { class: 'card show-live' }, h('h2', { text: 'Running' }), running, last, tc)),
    h('div', { class: 'card' }, h('h2', { text: 'Cues' }),
      h('table', { class: 'show-cues', id: 'show-cues' },
        h('thead', null, h('tr', null, ['', 'Cue', 'Name', 'Pre-wait', 'Follow', 'Timecode', 'Notes'].map((t) => h('th', { text: t })))),
        cues)));
  main.appendChild(page);

  // seen counts the events of the list shown: a read sent before one of
  // them arrived is older than what the page shows, and is dropped.
  let state = null, list = null, readAt = 0, stopped = false, seen = 0, streaming = false;

  async function loadLists() {
    try {
      const r = await api.get('/v1/cuelists');
      const names = (r && r.lists || []).map((l) => l.name);
      clear(pick);
      for (const n of names) pick.appendChild(h('option', { value: n, text: n }));
      if (!names.length) { setText(number, '—'); setText(name, 'No cue list on this gateway.'); return; }
      if (!names.includes(chosen)) chosen = names[0];
      pick.value = chosen;
      await load();
    } catch (e) {
      toast('Cue lists: ' + (e.text || e.message), 'bad');
    }
  }

  async function load() {
    if (!chosen) return;
    const asOf = seen, name = chosen;
    try {
      const r = await api.get('/v1/cuelists/' + encodeURIComponent(name));
      if (stopped || name !== chosen) return;
      list = r;
      renderCues();
      if (asOf === seen) show(r.state);
      else render();
    } catch (e) {
      toast('Cue list ' + name + ': ' + (e.text || e.message), 'bad');
    }
  }

  function show(st) {
    state = st;
    readAt = Date.now();
    render();
  }

  // onEvent takes one cue event: its state is the list's after it.
  function onEvent(ev) {
    if (ev.type === 'edited' || ev.type === 'deleted') {
      if (ev.list === chosen) seen++;
      loadLists();
      return;
    }
    if (ev.list !== chosen || !ev.state) return;
    seen++;
    show(ev.state);
  }

  function onStatus(st) {
    streaming = st.state === 'live';
    setText(live, streaming ? 'live' : (st.state === 'denied' ? 'not allowed to follow the show' : 'reconnecting…'));
    toggleClass(live, 'bad', !streaming);
    if (streaming) loadLists(); // what happened before the stream was connected is not replayed
  }

  // Operations go to the gateway one after another, in the order the
  // operator made them: a BACK clicked just before the space bar's GO is
  // done before the GO is sent, never after it.
  let queue = Promise.resolve();
  function act(op, number) {
    queue = queue.then(() => send(op, number));
    return queue;
  }

  async function send(op, number) {
    if (!canGo || !chosen) return;
    let path = '/v1/cuelists/' + encodeURIComponent(chosen) + '/' + op;
    let body;
    if (op === 'standby') body = { cue: number };
    try {
      const st = await api.post(path, body);
      // Live, the operation's own event shows its state (in order with
      // the fires that follow it); down, the answer is all there is.
      if (!streaming) show(st);
    } catch (e) {
      toast(op.toUpperCase() + ': ' + (e.text || e.message), 'bad');
    }
  }

  function renderCues() {
    clear(cues);
    for (const c of (list && list.cues) || []) {
      const follow = c.follow === 'after' ? 'after ' + (c.follow_ms / 1000) + ' s' : (c.follow === 'continue' ? 'continue' : '');
      const tr = h('tr', { dataset: { cue: c.number }, title: canGo ? 'Click: put the standby here' : null,
        on: { click: () => act('standby', c.number) } },
        h('td', { class: 'c-mark' }), h('td', { text: c.number }), h('td', { text: c.name || '' }),
        h('td', { text: c.pre_wait_ms ? (c.pre_wait_ms / 1000) + ' s' : '' }), h('td', { text: follow }),
        h('td', { text: c.timecode || '' }), h('td', { class: 'muted', text: c.notes || '' }));
      cues.appendChild(tr);
    }
  }

  function render() {
    if (!state) return;
    setText(number, state.standby || 'end');
    setText(name, state.standby ? (state.standby_name || '') : 'Past the last cue: BACK or click a cue.');
    setText(notes, state.standby_notes || '');
    goBtn.disabled = !canGo || !state.standby;
    const since = Date.now() - readAt;
    clear(running);
    for (const r of state.running || []) {
      const left = Math.max(0, r.remaining_ms - since);
      running.appendChild(h('li', { dataset: { cue: r.cue }, text: `${r.cue} ${r.name || ''} · ${r.phase.replace('_', '-')} · ${(left / 1000).toFixed(1)} s` }));
    }
    if (!(state.running || []).length) running.appendChild(h('li', { class: 'muted', text: 'nothing running' }));
    const l = state.last;
    setText(last, l ? `Last fired: ${l.cue} ${l.name || ''}${l.at ? ' at ' + clock(l.at) : ''}, ${l.boards} board results` +
      (l.failed ? `, ${l.failed} failed` : '') + ((l.errors || []).length ? ': ' + l.errors.join('; ') : '') : 'Nothing fired yet.');
    toggleClass(last, 'bad', !!(l && (l.failed || (l.errors || []).length)));
    const t = state.timecode;
    setText(tc, t ? `Timecode ${t.position} at ${t.rate} fps from ${t.source}: ${t.status}` : '');
    for (const tr of cues.children) {
      const on = tr.dataset.cue === state.standby;
      toggleClass(tr, 'standby', on);
      setText(tr.firstChild, on ? '▶' : '');
    }
  }

  // The space bar is GO, wherever the focus is but in a field (and it
  // never presses the focused button as well).
  function onKey(e) {
    if (e.code !== 'Space' && e.key !== ' ') return;
    const tag = (e.target && e.target.tagName) || '';
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') return;
    e.preventDefault();
    if (!e.repeat) act('go');
  }
  function onKeyUp(e) {
    if (e.code === 'Space' || e.key === ' ') e.preventDefault();
  }
  document.addEventListener('keydown', onKey);
  document.addEventListener('keyup', onKeyUp);

  loadLists();
  const stream = new EventStream(api, { path: '/v1/cuelists/events', resume: false, onEvent, onStatus }).start();
  const timer = setInterval(() => { if (state && (state.running || []).length) render(); }, TICK_MS);

  return {
    unmount() {
      stopped = true;
      stream.stop();
      clearInterval(timer);
      document.removeEventListener('keydown', onKey);
      document.removeEventListener('keyup', onKeyUp);
    },
  };
}
