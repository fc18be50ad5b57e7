// Show: run a cue list (gateway/cue, docs/show.md). A big GO fires the
// standby cue; the standby cue's number, name and notes are large; the
// running cues count down to their moment; the space bar is GO. Nothing
// asks for confirmation: a show has no time for dialogs. The state is read
// from GET /v1/cuelists/{name}/state several times a second while the
// page is open, and the remaining times count down between reads.

import { h, clear, setText, button, toggleClass } from '../dom.js';
import { clock } from '../fmt.js';
import { readAt, supersedes } from '../store.js';

const POLL_MS = 250;
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
  const cues = h('tbody');
  const page = h('section', { class: 'page page-show' },
    h('div', { class: 'row show-head' }, h('h1', { text: 'Show' }), pick),
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

  let state = null, list = null, shownAt = 0, stopped = false, timer = null, busy = false;
  // sent numbers the operations sent (the store's stale-read rule): a
  // state read is numbered by the last one sent before it.
  const sent = { n: 0 };

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
    try {
      const r = await api.get('/v1/cuelists/' + encodeURIComponent(chosen));
      list = r;
      state = r.state;
      shownAt = Date.now();
      renderCues();
      render();
    } catch (e) {
      toast('Cue list ' + chosen + ': ' + (e.text || e.message), 'bad');
    }
  }

  async function poll() {
    if (stopped) return;
    if (chosen && !busy) {
      const n = readAt(sent.n);
      try {
        const st = await api.get('/v1/cuelists/' + encodeURIComponent(chosen) + '/state');
        // A read sent before an operation sent since is older than what
        // the page shows (or is about to): dropped, the next poll is new.
        if (supersedes(n, sent)) {
          state = st;
          shownAt = Date.now();
        }
      } catch { /* the connection banner says why */ }
    }
    render();
    if (!stopped) timer = setTimeout(poll, POLL_MS);
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
    sent.n++;
    let path = '/v1/cuelists/' + encodeURIComponent(chosen) + '/' + op;
    let body;
    if (op === 'standby') body = { cue: number };
    busy = true;
    try {
      state = await api.post(path, body);
      shownAt = Date.now();
      render();
    } catch (e) {
      toast(op.toUpperCase() + ': ' + (e.text || e.message), 'bad');
    } finally {
      busy = false;
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
    const since = Date.now() - shownAt;
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

  loadLists().then(() => { if (!stopped) timer = setTimeout(poll, POLL_MS); });

  return {
    unmount() {
      stopped = true;
      clearTimeout(timer);
      document.removeEventListener('keydown', onKey);
      document.removeEventListener('keyup', onKeyUp);
    },
  };
}
