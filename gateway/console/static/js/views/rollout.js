// One rollout, live: per wave and per board, from its watch stream
// (GET /v1/rollouts/{id}/events, resumed by event number), with the
// controls the role allows: pause, resume, abort, revert.

import { h, clear, setText, button } from '../dom.js';
import { clock, shortSha, plural, dateTime } from '../fmt.js';
import { LineWatch } from '../stream.js';
import { phaseClass, stateClass } from './firmware.js';

// windowText says whether a rollout's window is open and, when it is
// not, when it next opens, in the window's own time zone (the venue's)
// and in UTC; '' for a rollout without a window or one that finished.
export function windowText(ro) {
  const w = ro && ro.plan && ro.plan.window;
  if (!w || ro.finished) return '';
  if (ro.window_open) return 'Window open: boards may start.';
  if (!ro.next_window) return 'Window closed; it never opens again: no board will start.';
  let local = '';
  const tz = w.time_zone || 'UTC';
  try {
    local = new Date(ro.next_window).toLocaleString('sv-SE', { timeZone: tz, hour12: false }).slice(0, 16) + ' ' + tz;
  } catch (e) { local = ''; }
  return 'Window closed; it next opens ' + (local ? local + ' (' + dateTime(ro.next_window) + ')' : dateTime(ro.next_window)) + '.';
}

export function mount(main, ctx, [id]) {
  const { api, store, session } = ctx;
  let ro = null;
  const boards = new Map(); // board id -> {board, wave, phase, note, error, attempts}
  const log = [];

  const title = h('h1');
  const statePill = h('span', { class: 'pill' });
  const reason = h('p', { class: 'muted' });
  const windowEl = h('p', { class: 'muted', id: 'ro-window', role: 'status' });
  const summary = h('p', { class: 'summary', id: 'ro-summary', role: 'status' });
  const bar = h('progress', { max: 100, value: 0, id: 'ro-progress' });
  const controls = h('div', { class: 'row', role: 'toolbar', 'aria-label': 'Rollout controls' });
  const wavesEl = h('div', { class: 'waves-live', id: 'ro-waves' });
  const tbody = h('tbody');
  const logEl = h('ol', { class: 'rlog' });
  const out = h('output', { class: 'result', role: 'status' });
  const watchState = h('span', { class: 'muted' });

  main.appendChild(h('section', { class: 'page page-rollout' },
    h('div', { class: 'board-head' }, h('a', { href: '#/firmware', class: 'back', text: '← Firmware' }), title, statePill, watchState),
    reason, windowEl, h('div', { class: 'row' }, bar, summary), controls, out,
    h('section', { class: 'card wide' }, h('h2', { text: 'Waves' }), wavesEl),
    h('section', { class: 'card wide' }, h('h2', { text: 'Boards' }), h('div', { class: 'scroll' },
      h('table', { class: 'grid', id: 'ro-boards' }, h('thead', null, h('tr', null, ['Board', 'Wave', 'Phase', 'From', 'Note', 'Tries'].map((t) => h('th', { text: t })))), tbody))),
    h('section', { class: 'card wide' }, h('h2', { text: 'Changes' }), h('div', { class: 'happ-wrap' }, logEl))));

  function name(bid) { const b = store.boards.get(bid); return b ? (b.hostname || bid) : bid; }

  function renderControls() {
    clear(controls);
    if (!ro) return;
    const s = ro.state;
    const add = (label, need, path, cls) => {
      if (!session.can(need)) return;
      controls.appendChild(button(label, async () => {
        try {
          ro = await api.post('/v1/rollouts/' + encodeURIComponent(id) + '/' + path, path === 'resume' ? {} : { reason: 'from the console' });
          out.className = 'result ok';
          out.textContent = `${label}: done.`;
          render();
        } catch (e) { out.className = 'result bad'; out.textContent = `${label} refused: ${e.text || e.message}`; }
      }, { class: cls || '', dataset: { control: path } }));
    };
    if (s === 'running') add('Pause', 'pause', 'pause');
    if (s === 'paused') add('Resume', 'resume', 'resume', 'primary');
    if (s === 'running' || s === 'paused') add('Abort', 'abort', 'abort', 'danger');
    if (s === 'running' || s === 'paused' || s === 'aborted' || s === 'done') add('Revert', 'revert', 'revert', 'danger');
  }

  function render() {
    if (!ro) return;
    setText(title, `Rollout ${(ro.plan && ro.plan.name) || ro.id}: ${ro.image && ro.image.app ? ro.image.app.version : shortSha(ro.image && ro.image.sha256)}`);
    setText(statePill, ro.state + (ro.finished ? ' · finished' : ''));
    statePill.className = 'pill ' + stateClass(ro.state);
    setText(reason, ro.reason || '');
    setText(windowEl, windowText(ro));
    const all = [...boards.values()];
    const ok = all.filter((b) => b.phase === 'succeeded').length;
    const bad = all.filter((b) => phaseClass(b.phase) === 'bad').length;
    bar.value = all.length ? Math.round(100 * (ok + bad) / all.length) : 0;
    const waiting = all.filter((b) => b.phase === 'pending' && b.waiting).length;
    setText(summary, `${ok} of ${plural(all.length, 'board')} confirmed` + (bad ? `, ${bad} failed` : '') + (waiting ? `, ${waiting} waiting` : '') + ` · wave ${Math.min(ro.wave + 1, (ro.waves || []).length)} of ${(ro.waves || []).length}` + (ro.finished && ok === all.length && all.length ? ' · every board confirmed' : ''));
    renderControls();
    // waves
    clear(wavesEl);
    (ro.waves || []).forEach((w, i) => {
      const ids = w.boards || [];
      const done = ids.filter((x) => (boards.get(x) || {}).phase === 'succeeded').length;
      wavesEl.appendChild(h('div', { class: 'wave' + (i === ro.wave && !ro.finished ? ' current' : '') },
        h('strong', { text: `Wave ${i + 1}: ${done}/${ids.length}` }),
        h('div', { class: 'chips' }, ids.map((x) => {
          const b = boards.get(x) || { phase: 'pending' };
          return h('span', { class: 'chip phase-' + phaseClass(b.phase), title: `${x}: ${b.phase}`, text: `${name(x)} · ${b.phase === 'succeeded' ? 'confirmed' : b.phase}` });
        }))));
    });
    if ((ro.refused || []).length) {
      wavesEl.appendChild(h('p', { class: 'muted', text: 'Refused: ' + ro.refused.map((r) => `${name(r.board)} (${r.reason})`).join('; ') }));
    }
    // boards
    clear(tbody);
    for (const b of all.sort((x, y) => x.wave - y.wave || (x.board < y.board ? -1 : 1))) {
      tbody.appendChild(h('tr', { dataset: { board: b.board, phase: b.phase }, class: 'phase-' + phaseClass(b.phase) },
        h('td', null, h('a', { href: '#/board/' + encodeURIComponent(b.board), text: name(b.board) })),
        h('td', { text: String(b.wave + 1) }),
        h('td', { class: 'phase', text: b.phase === 'succeeded' ? 'confirmed' : b.phase }),
        h('td', { text: [b.from_version, b.from_slot].filter(Boolean).join(' on ') }),
        h('td', { text: b.error || (b.phase === 'pending' && b.waiting ? 'waiting: ' + b.waiting : b.note || '') }),
        h('td', { text: String(b.attempts || 0) })));
    }
    clear(logEl);
    for (const e of log.slice(-200).reverse()) {
      logEl.appendChild(h('li', null, h('time', { text: clock(Date.parse(e.time)) }),
        h('span', { class: 'kind', text: e.board ? name(e.board) : 'rollout' }),
        h('span', { text: (e.phase || e.state || '') + (e.note ? ': ' + e.note : '') })));
    }
  }

  let raf = 0;
  const later = () => { if (!raf) raf = requestAnimationFrame(() => { raf = 0; render(); }); };
  let watch = null;
  let refresh = 0;

  // readAll reads the rollout and its boards (progress, what each board
  // ran before, tries), which the watch's changes do not carry.
  async function readAll() {
    const [r, bs] = await Promise.all([api.get('/v1/rollouts/' + encodeURIComponent(id)), api.get('/v1/rollouts/' + encodeURIComponent(id) + '/boards')]);
    ro = r;
    for (const b of bs || []) boards.set(b.board, { board: b.board, wave: b.wave, phase: b.phase, error: b.error, attempts: b.attempts, waiting: b.waiting || '', from_version: b.from_version, from_slot: b.from_slot, note: (b.timeline && b.timeline.length) ? b.timeline[b.timeline.length - 1].note : '' });
  }

  async function load() {
    try {
      await readAll();
      render();
    } catch (e) {
      out.className = 'result bad';
      out.textContent = 'Cannot read the rollout: ' + (e.text || e.message);
      return;
    }
    watch = new LineWatch(api, '/v1/rollouts/' + encodeURIComponent(id) + '/events', {
      onItem: (e) => {
        log.push(e);
        if (e.board) {
          const b = boards.get(e.board) || { board: e.board, wave: e.wave, phase: 'pending' };
          if (e.phase) b.phase = e.phase;
          // a board that restarted into another image: read its record again
          if (['succeeded', 'reverted', 'rolled_back'].includes(e.phase)) store.soon(e.board);
          b.wave = e.wave;
          b.note = e.note;
          boards.set(e.board, b);
        } else if (e.state && ro) {
          ro.state = e.state;
          ro.reason = e.note || ro.reason;
        }
        if (ro && typeof e.wave === 'number' && !e.board) ro.wave = e.wave;
        later();
        // the rollout record (progress, finished) is read again after a
        // burst of changes settles
        clearTimeout(refresh);
        refresh = setTimeout(async () => {
          try { await readAll(); later(); } catch (err) { /* the next change reads again */ }
        }, 300);
      },
      onStatus: (st) => setText(watchState, st.state === 'live' ? 'live' : st.state === 'down' ? 'reconnecting…' : st.state === 'ended' ? '' : st.error || st.state),
    });
    watch.start();
  }
  load();
  return { unmount() { if (watch) watch.stop(); clearTimeout(refresh); } };
}
