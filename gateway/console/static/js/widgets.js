// Pieces shared by pages: action forms, per-board results, and the
// drawings of a board's LED strip, screen and holo.

import { h, clear, setText, toggleClass, field, select } from './dom.js';
import { plural } from './fmt.js';

export const LED_MODES = ['solid', 'wipe', 'rainbow', 'flicker', 'off'];
export const MOTIONS = ['center', 'nod', 'wag', 'twitch', 'scan', 'circle', 'stop', 'off'];

// ledsForm: mode, colour, brightness -> PATCH /leds body.
export function ledsForm(prefix) {
  const mode = select(LED_MODES, 'solid', { id: prefix + '-led-mode', name: 'mode' });
  const colour = h('input', { type: 'color', id: prefix + '-led-colour', name: 'colour', value: '#ff3366' });
  const bright = h('input', { type: 'number', id: prefix + '-led-brightness', name: 'brightness', min: 0, max: 100, value: 30 });
  const el = h('div', { class: 'form-grid' }, field('Mode', mode), field('Colour', colour), field('Brightness %', bright, 'keep at 30 or below on board power'));
  return { el, body: () => ({ mode: mode.value, colour: colour.value, brightness: Number(bright.value) }) };
}

// screenForm: a colour, a file, or off -> an action.
export function screenForm(prefix) {
  const what = select([['colour', 'a colour'], ['path', 'a file (image or clip)'], ['off', 'off (panel sleeps)']], 'colour', { id: prefix + '-screen-what' });
  const colour = h('input', { type: 'color', id: prefix + '-screen-colour', value: '#1f6feb' });
  const path = h('input', { type: 'text', id: prefix + '-screen-path', placeholder: '/clips/intro.mov', spellcheck: 'false' });
  const loop = h('input', { type: 'checkbox', id: prefix + '-screen-loop' });
  const el = h('div', { class: 'form-grid' }, field('Show', what), field('Colour', colour), field('File', path), field('Loop', loop));
  return {
    el,
    action: () => {
      if (what.value === 'off') return { kind: 'screen_off', body: {} };
      if (what.value === 'path') return { kind: 'screen_show', body: { path: path.value.trim(), loop: loop.checked } };
      return { kind: 'screen_show', body: { colour: colour.value } };
    },
  };
}

export function holoForm(prefix) {
  const motion = select(MOTIONS, 'nod', { id: prefix + '-holo-motion' });
  const el = h('div', { class: 'form-grid' }, field('Motion', motion));
  return { el, body: () => ({ motion: motion.value }) };
}

export function sceneForm(prefix, names) {
  const name = h('input', { type: 'text', id: prefix + '-scene-name', list: prefix + '-scene-names', placeholder: 'scene name', spellcheck: 'false' });
  const dl = h('datalist', { id: prefix + '-scene-names' }, (names || []).map((n) => h('option', { value: n })));
  const el = h('div', { class: 'form-grid' }, field('Scene', name), dl);
  return { el, body: () => ({ name: name.value.trim() }) };
}

// parseLabels reads "k=v, k2=v2" into an object; throws on a bad pair.
export function parseLabels(s) {
  const out = {};
  for (const part of String(s).split(',')) {
    const p = part.trim();
    if (!p) continue;
    const i = p.indexOf('=');
    if (i <= 0) throw new Error(`"${p}" is not key=value`);
    out[p.slice(0, i).trim()] = p.slice(i + 1).trim();
  }
  return out;
}

export function labelsText(labels) {
  return Object.entries(labels || {}).sort().map(([k, v]) => k + '=' + v).join(', ');
}

// outcome tells one board's result: ok, or the error as the board (or the
// gateway) gave it.
export function outcome(r) {
  if (!r.error) return { ok: true, text: r.via === 'group' ? 'sent by group frame (confirmed by the next report)' : 'done' + (r.status ? ` (${r.status})` : '') };
  let text = r.error;
  if (r.message && !text.includes(r.message)) text += ' — ' + r.message;
  return { ok: false, text };
}

// resultsTable lists each board's outcome.
export function resultsTable(store, results) {
  const ok = results.filter((r) => !r.error).length;
  const tbl = h('table', { class: 'grid results' },
    h('thead', null, h('tr', null, h('th', { text: 'Board' }), h('th', { text: 'Via' }), h('th', { text: 'Outcome' }))),
    h('tbody', null, results.map((r) => {
      const o = outcome(r);
      const b = store.boards.get(r.board);
      return h('tr', { class: o.ok ? 'ok' : 'bad' },
        h('td', null, h('a', { href: '#/board/' + encodeURIComponent(r.board), text: b ? store.label(b) : r.board })),
        h('td', { text: r.via || '' }),
        h('td', { class: 'outcome', text: o.text }));
    })));
  return h('div', null, h('p', { class: 'summary', text: `${ok} of ${plural(results.length, 'board')} done` + (ok < results.length ? `, ${results.length - ok} refused` : '') }), h('div', { class: 'scroll' }, tbl));
}

// runAction runs a fleet action on boards and reports: a toast when all
// went well, the per-board table otherwise.
export async function runAction(ctx, selector, kind, body, title) {
  try {
    const r = await ctx.api.post('/v1/actions', { selector, kind, body });
    const results = (r && r.results) || [];
    const bad = results.filter((x) => x.error);
    if (bad.length) ctx.dialog(title + ': some boards refused', resultsTable(ctx.store, results));
    else ctx.toast(`${title}: done on ${plural(results.length, 'board')}.`, 'ok');
    return results;
  } catch (e) {
    ctx.dialog(title + ': refused', h('p', { class: 'bad', text: e.text || e.message }));
    return null;
  }
}

// eachBoard runs fn(id) for many boards, a few at a time, and collects
// results in the action result shape.
export async function eachBoard(ids, fn, parallel = 8) {
  const results = [];
  let i = 0;
  async function worker() {
    while (i < ids.length) {
      const id = ids[i++];
      try {
        await fn(id);
        results.push({ board: id, via: 'api', status: 200 });
      } catch (e) {
        results.push({ board: id, via: 'api', status: e.status || 0, error: e.code || 'failed', message: e.message || '' });
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(parallel, ids.length) }, worker));
  return results;
}

// --- drawings of a board's state ---

// safeColour is c when it is a #rrggbb colour (as boards report them),
// else black: a board's text never reaches a style sheet as anything else.
export function safeColour(c) {
  return typeof c === 'string' && /^#[0-9a-fA-F]{6}$/.test(c) ? c : '#000000';
}

// ledStrip draws count LEDs; update(state) paints them in the strip's
// colour, brightness and mode.
export function ledStrip() {
  const strip = h('div', { class: 'strip', role: 'img', 'aria-label': 'LED strip' });
  let n = -1;
  function update(st) {
    const count = Math.max(1, Math.min(300, (st && st.count) || 24));
    if (count !== n) {
      clear(strip);
      for (let i = 0; i < count; i++) strip.appendChild(h('span', { class: 'led', style: { '--i': String(i), '--n': String(count) } }));
      n = count;
    }
    const mode = st && /^[a-z]{1,16}$/.test(st.mode) ? st.mode : 'off';
    strip.className = 'strip mode-' + mode;
    const colour = safeColour(st && st.colour);
    strip.style.setProperty('--c', colour);
    const b = st && typeof st.brightness === 'number' ? st.brightness : 30;
    strip.style.setProperty('--b', String(0.25 + 0.75 * Math.min(100, Math.max(0, b)) / 100));
    strip.setAttribute('aria-label', `LED strip: ${mode}, ${colour}, ${b}% brightness, ${count} LEDs`);
  }
  return { el: strip, update };
}

// screenView draws the round panel with what it shows.
export function screenView() {
  const disc = h('div', { class: 'disc' });
  const label = h('div', { class: 'disc-label' });
  disc.appendChild(label);
  function update(st) {
    const showing = st ? String(st.showing || 'nothing') : 'unknown';
    const powered = st ? st.powered !== false : false;
    disc.className = 'disc show-' + showing.replace(/[^a-z]/g, '') + (powered ? '' : ' asleep');
    disc.style.setProperty('--c', safeColour(st && st.colour));
    let text = '';
    if (!st) text = 'no report yet';
    else if (!powered) text = 'asleep';
    else if (showing === 'colour') text = st.colour || 'colour';
    else if (showing === 'clip') text = 'clip ' + (st.path || '') + (st.clip ? ` · frame ${st.clip.shown}/${st.clip.frames}` : '');
    else if (showing === 'image') text = 'image ' + (st.path || '');
    else if (showing === 'calibration') text = 'calibration';
    else text = showing;
    setText(label, text);
    disc.setAttribute('aria-label', 'Screen: ' + text);
  }
  disc.setAttribute('role', 'img');
  return { el: disc, update };
}

// holoPad draws the holo's position (x, y in -1..1, right and up).
export function holoPad() {
  const dot = h('span', { class: 'holo-dot' });
  const pad = h('div', { class: 'holo-pad', role: 'img', 'aria-label': 'holo position' }, h('span', { class: 'holo-x' }), h('span', { class: 'holo-y' }), dot);
  function update(st) {
    const x = st && typeof st.x === 'number' ? st.x : 0;
    const y = st && typeof st.y === 'number' ? st.y : 0;
    dot.style.setProperty('left', (50 + 50 * Math.max(-1, Math.min(1, x))) + '%');
    dot.style.setProperty('top', (50 - 50 * Math.max(-1, Math.min(1, y))) + '%');
    toggleClass(dot, 'moving', !!(st && st.moving));
    pad.setAttribute('aria-label', `holo at x ${x.toFixed(2)}, y ${y.toFixed(2)}`);
  }
  return { el: pad, update };
}
