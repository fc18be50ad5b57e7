// Groups and scenes: a pad of scene buttons per group. A fire is one
// scene_apply action on the group; its time is measured from the click to
// the scene_started happening of the last board of the group, as the
// event stream brings them in.

import { h, clear, setText, button } from '../dom.js';
import { clock, plural } from '../fmt.js';
import { outcome } from '../widgets.js';

const FIRE_TIMEOUT_MS = 10000;
const scenesByGroup = new Map(); // survives page changes: group -> [names]
const fires = new Map(); // group -> [fire records], newest first

export function mount(main, ctx) {
  const { store, session, api } = ctx;
  const canAct = session.can('act');
  const list = h('div', { class: 'groups' });
  const page = h('section', { class: 'page page-groups' }, h('h1', { text: 'Groups & scenes' }),
    h('p', { class: 'muted', text: canAct
      ? 'Each button applies a scene saved on the group\'s boards to the whole group at once. The time shown runs from the click to the last board\'s report that the scene started.'
      : 'Firing scenes needs an operator; this page shows the groups and their boards.' }),
    list);
  main.appendChild(page);
  const cards = new Map(); // group -> {el, pad, log, count}

  function render() {
    const groups = store.groups();
    const want = groups.map(([g]) => g).join();
    if (want !== [...cards.keys()].join()) {
      clear(list);
      cards.clear();
      for (const [g] of groups) cards.set(g, makeCard(g));
      for (const c of cards.values()) list.appendChild(c.el);
    }
    for (const [g, members] of groups) {
      const c = cards.get(g);
      const online = members.filter((b) => b.online).length;
      setText(c.count, `${plural(members.length, 'board')} · ${online} online`);
      renderPad(g, c);
      renderLog(g, c);
    }
    if (!groups.length) list.appendChild(h('p', { class: 'muted', text: 'No board is in a group.' }));
  }

  function makeCard(g) {
    const count = h('span', { class: 'muted' });
    const pad = h('div', { class: 'pad', role: 'group', 'aria-label': 'Scenes of group ' + g });
    const log = h('ol', { class: 'fires', 'aria-live': 'polite' });
    const el = h('section', { class: 'card group', dataset: { group: String(g) } },
      h('h2', null, 'Group ' + g + ' ', count), pad,
      canAct ? h('div', { class: 'row' }, button('End scene', () => fire(g, null), { class: 'ghost small' }),
        button('Read scenes again', () => loadScenes(g, true), { class: 'ghost small' })) : null,
      log);
    return { el, pad, log, count, padKey: null };
  }

  function renderPad(g, c) {
    const names = scenesByGroup.get(g);
    const key = names ? names.join('\u0000') : null;
    if (key === c.padKey) return;
    c.padKey = key;
    clear(c.pad);
    if (!canAct) return;
    if (!names) { c.pad.appendChild(h('span', { class: 'muted', text: 'reading scenes…' })); return; }
    if (!names.length) { c.pad.appendChild(h('span', { class: 'muted', text: 'no scene saved on this group\'s boards' })); return; }
    for (const n of names) c.pad.appendChild(button(n, () => fire(g, n), { class: 'scene-btn', dataset: { scene: n } }));
  }

  function renderLog(g, c) {
    const fs = fires.get(g) || [];
    clear(c.log);
    for (const f of fs.slice(0, 6)) {
      const done = f.arrived.size;
      let text = `${clock(f.at)} ${f.name || 'end scene'}: `;
      if (f.error) text += 'refused: ' + f.error;
      else if (!f.name) text += f.finished ? `sent to ${plural(f.expect.size, 'board')} in ${Math.round(f.actionMs)} ms` : 'sending…';
      else if (done === f.expect.size && f.expect.size > 0) text += `${done}/${f.expect.size} boards in ${Math.round(f.lastMs)} ms (action answered in ${Math.round(f.actionMs || 0)} ms)`;
      else if (f.timedOut) text += `${done}/${f.expect.size} boards reported within ${FIRE_TIMEOUT_MS / 1000} s` + (f.refused.length ? `; refused: ${f.refused.join('; ')}` : '');
      else text += `${done}/${f.expect.size} boards…`;
      const ok = !f.error && (!f.name ? f.finished : done === f.expect.size);
      c.log.appendChild(h('li', { class: ok ? 'ok' : (f.timedOut || f.error ? 'bad' : ''), dataset: { scene: f.name || '' }, text }));
    }
  }

  async function loadScenes(g, again) {
    if (!canAct || (!again && scenesByGroup.has(g))) return;
    const members = (store.groups().find(([x]) => x === g) || [0, []])[1].filter((b) => b.online).slice(0, 3);
    const names = new Set();
    await Promise.all(members.map(async (b) => {
      try {
        const s = await api.call(b.id, 'GET', '/scenes');
        for (const sc of (s && s.scenes) || []) names.add(sc.name || sc);
      } catch (e) { /* a board that cannot answer adds nothing */ }
    }));
    scenesByGroup.set(g, [...names].sort());
    const c = cards.get(g);
    if (c) renderPad(g, c);
  }

  async function fire(g, name) {
    const members = (store.groups().find(([x]) => x === g) || [0, []])[1];
    const f = { at: Date.now(), t0: performance.now(), name, expect: new Set(members.filter((b) => b.online).map((b) => b.id)), arrived: new Map(), refused: [], lastMs: 0 };
    if (!fires.has(g)) fires.set(g, []);
    fires.get(g).unshift(f);
    fires.get(g).splice(12);
    if (name) pending.add(f);
    render();
    try {
      const r = await api.post('/v1/actions', { selector: { groups: [g] }, kind: name ? 'scene_apply' : 'scene_end', body: name ? { name } : {} });
      f.actionMs = performance.now() - f.t0;
      f.finished = true;
      for (const res of r.results || []) {
        const o = outcome(res);
        if (!o.ok) {
          f.refused.push(`${(store.boards.get(res.board) || { hostname: res.board }).hostname}: ${o.text}`);
          f.expect.delete(res.board);
        }
      }
      if (f.refused.length && !f.expect.size) f.error = f.refused.join('; ');
    } catch (e) {
      f.error = e.text || e.message;
      pending.delete(f);
    }
    setTimeout(() => { if (pending.has(f)) { f.timedOut = true; pending.delete(f); render(); } }, FIRE_TIMEOUT_MS);
    check(f);
    render();
  }

  function check(f) {
    if (f.name && f.expect.size && [...f.expect].every((id) => f.arrived.has(id))) {
      pending.delete(f);
      f.lastMs = Math.max(...[...f.expect].map((id) => f.arrived.get(id)));
    }
  }

  const pending = new Set();
  const offEvent = store.on('event', (ev) => {
    if (ev.type !== 'happening' || ev.kind !== 'scene_started' || !pending.size) return;
    const now = performance.now();
    let d = null;
    for (const f of pending) {
      if (!f.expect.has(ev.board) || f.arrived.has(ev.board)) continue;
      if (d === null) { try { d = JSON.parse(ev.data); } catch { d = {}; } }
      if (d.name !== f.name) continue;
      f.arrived.set(ev.board, now - f.t0);
      check(f);
      redraw();
    }
  });
  let raf = 0;
  function redraw() { if (!raf) raf = requestAnimationFrame(() => { raf = 0; render(); }); }
  const offBoards = store.on('boards', redraw);
  const tick = setInterval(redraw, 2000);

  render();
  for (const [g] of store.groups()) loadScenes(g, false);
  return { unmount() { offEvent(); offBoards(); clearInterval(tick); pending.clear(); } };
}
