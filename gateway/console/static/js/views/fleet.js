// The fleet page: every board in one table, kept live by the event
// stream. Rows are built once and updated cell by cell; rows are ordered
// and filtered again only when the operator changes the view (or a
// board's filtered fields change, at most once a second), so streaming
// events never move the table under the pointer.

import { h, clear, setText, toggleClass, select, button, debounceFrame } from '../dom.js';
import { ago, updateAvailable, plural } from '../fmt.js';
import { ledsForm, screenForm, holoForm, sceneForm, runAction, resultsTable, eachBoard, parseLabels, labelsText } from '../widgets.js';

// view settings survive moving between pages
const view = {
  q: '', status: 'all', group: '0', upd: false, channel: '', sortKey: 'name', sortDir: 1,
  compact: localStorage.getItem('holo.console.compact') === '1',
  selected: new Set(),
};

const COLUMNS = [
  ['sel', ''], ['name', 'Board'], ['where', 'Address'], ['groups', 'Groups'], ['labels', 'Labels'],
  ['status', 'State'], ['firmware', 'Firmware'], ['update', 'Update'], ['seen', 'Last seen'],
];

function lineText(b) { return b.line ? `line ${b.line} #${b.address}` : ''; }
function lanText(b) { return b.url ? 'LAN ' + b.url.replace(/^https?:\/\//, '') : ''; }
function whereText(b) { return [lineText(b), lanText(b)].filter(Boolean).join(' · ') || '—'; }

function sessionText(b) {
  const o = b.live.ota && b.live.ota.data;
  if (!o || typeof o !== 'object' || !o.state || o.state === 'idle') return '';
  let s = o.state;
  if ((o.state === 'receiving' || o.state === 'downloading') && o.total) s += ` ${Math.floor(100 * o.bytes / o.total)}%`;
  if (o.state === 'failed' && o.error) s += ': ' + o.error;
  return s;
}

export function mount(main, ctx) {
  const { store, session } = ctx;
  const canAct = session.can('act');
  const rows = new Map(); // id -> row record
  let order = []; // visible ids in order
  const dirty = new Set();
  let refilterAt = 0;

  // --- toolbar ---
  const search = h('input', { type: 'search', id: 'fleet-search', placeholder: 'Search name, id, address, label…', value: view.q, 'aria-label': 'Search boards' });
  const status = select([['all', 'All states'], ['online', 'Online'], ['offline', 'Offline']], view.status, { id: 'fleet-status', 'aria-label': 'Filter by state' });
  const group = select([['0', 'All groups']], view.group, { id: 'fleet-group', 'aria-label': 'Filter by group' });
  const upd = h('input', { type: 'checkbox', id: 'fleet-upd', checked: view.upd });
  const channel = select([], '', { id: 'fleet-channel', 'aria-label': 'Release channel to compare with' });
  const compact = h('input', { type: 'checkbox', id: 'fleet-compact', checked: view.compact });
  const summary = h('span', { class: 'summary', id: 'fleet-summary', role: 'status' });

  const toolbar = h('div', { class: 'toolbar' }, search, status, group,
    h('label', { class: 'check', for: 'fleet-upd' }, upd, ' Update available on'), channel,
    h('label', { class: 'check', for: 'fleet-compact' }, compact, ' Compact'), summary);

  // --- bulk actions (operators) ---
  const selCount = h('span', { class: 'sel-count', id: 'sel-count' });
  const bulkButtons = [];
  let bulk = null;
  let clearSel = null;
  if (canAct) {
    const add = (text, fn, need) => {
      if (need && !session.can(need)) return;
      const b = button(text, fn, { class: 'bulk', dataset: { bulk: text.toLowerCase().replace(/[^a-z]+/g, '-') } });
      bulkButtons.push(b);
    };
    add('LEDs…', bulkLEDs);
    add('Screen…', bulkScreen);
    add('Scene…', bulkScene);
    add('Holo…', bulkHolo);
    add('Labels…', bulkLabels, 'labels');
    add('Restart…', bulkRestart, 'restart');
    add('Roll out…', bulkRollout, 'rollout');
    clearSel = button('Clear selection', () => { view.selected.clear(); syncSelection(); }, { class: 'ghost', id: 'sel-clear' });
    bulk = h('div', { class: 'bulkbar', role: 'toolbar', 'aria-label': 'Actions on the selected boards' }, selCount, h('div', { class: 'bulk-buttons' }, bulkButtons, clearSel));
  }

  // --- table ---
  const selAll = h('input', { type: 'checkbox', id: 'sel-all', 'aria-label': 'Select every board shown' });
  const headRow = h('tr', { role: 'row' });
  for (const [key, label] of COLUMNS) {
    if (key === 'sel') { headRow.appendChild(h('th', { class: 'c-sel', scope: 'col', role: 'columnheader' }, canAct ? selAll : null)); continue; }
    const sortable = key !== 'labels';
    const th = h('th', { class: 'c-' + key, scope: 'col', role: 'columnheader', dataset: { key } },
      sortable ? button(label, () => sortBy(key), { class: 'sort' }) : label);
    headRow.appendChild(th);
  }
  const tbody = h('tbody', { role: 'rowgroup' });
  // display: grid drops a table's implicit roles in some browsers; they
  // are set explicitly
  const table = h('table', { class: 'grid fleet-table' + (canAct ? '' : ' no-select'), id: 'fleet-table', role: 'table', 'aria-label': 'Boards' },
    h('thead', { role: 'rowgroup' }, headRow), tbody);
  const empty = h('p', { class: 'empty muted', text: 'No boards match.' , hidden: true });
  const page = h('section', { class: 'page page-fleet' + (view.compact ? ' compact' : '') },
    h('h1', { class: 'visually-hidden', text: 'Fleet' }), toolbar, bulk, h('div', { class: 'table-wrap' }, table, empty));
  main.appendChild(page);

  // --- rows ---
  function makeRow(b) {
    const cb = canAct ? h('input', { type: 'checkbox', class: 'sel', 'aria-label': 'Select ' + store.label(b), dataset: { id: b.id } }) : null;
    const link = h('a', { href: '#/board/' + encodeURIComponent(b.id), class: 'name' });
    const idEl = h('span', { class: 'id' });
    const c = {
      where: h('td', { class: 'c-where' }),
      line: h('span', { class: 'line' }),
      lan: h('span', { class: 'lan' }),
      groups: h('td', { class: 'c-groups' }),
      labels: h('td', { class: 'c-labels' }),
      statusText: h('span', { class: 'st' }),
      fw: h('span', { class: 'fw' }),
      badge: h('span', { class: 'badge upd', hidden: true }),
      update: h('td', { class: 'c-update' }),
      seen: h('td', { class: 'c-seen' }),
    };
    const statusTd = h('td', { class: 'c-status' }, h('span', { class: 'dot', 'aria-hidden': 'true' }), c.statusText);
    const tr = h('tr', { role: 'row', dataset: { id: b.id } },
      h('td', { class: 'c-sel' }, cb),
      h('td', { class: 'c-name' }, link, idEl),
      c.where, c.groups, c.labels, statusTd,
      h('td', { class: 'c-firmware' }, c.fw, c.badge), c.update, c.seen);
    c.where.append(c.line, c.lan);
    for (const td of tr.children) td.setAttribute('role', 'cell');
    const rec = { tr, cb, link, idEl, c, ver: -1, labelsKey: null, seenText: '' };
    rows.set(b.id, rec);
    return rec;
  }

  function channelVersion() {
    const ch = store.channels.find((x) => x.name === view.channel);
    return ch ? ch.version : '';
  }

  function updateRow(rec, b, now) {
    if (rec.ver !== b.ver) {
      rec.ver = b.ver;
      setText(rec.link, b.hostname || b.id);
      setText(rec.idEl, b.id);
      setText(rec.c.line, lineText(b) || (b.url ? '' : '—'));
      setText(rec.c.lan, lanText(b));
      setText(rec.c.groups, b.groups.join(', ') || '—');
      const lk = labelsText(b.labels);
      if (lk !== rec.labelsKey) {
        rec.labelsKey = lk;
        clear(rec.c.labels);
        for (const [k, v] of Object.entries(b.labels).sort()) rec.c.labels.appendChild(h('span', { class: 'chip', text: k + '=' + v }));
        rec.c.labels.title = lk;
      }
      toggleClass(rec.tr, 'offline', !b.online);
      setText(rec.c.statusText, b.online ? 'online' : 'offline' + (b.offline_reason ? ': ' + b.offline_reason : ''));
      rec.c.statusText.title = b.online ? (b.transports || []).join(', ') : b.offline_reason;
      setText(rec.c.fw, b.firmware || '—');
      setText(rec.c.update, sessionText(b));
    }
    const cv = channelVersion();
    const avail = updateAvailable(b.firmware, cv);
    if (rec.badge !== avail) {
      rec.badge = avail;
      rec.c.badge.hidden = !avail;
    }
    setText(rec.c.badge, avail ? '→ ' + cv : '');
    const s = ago(b.lastSeen, now);
    if (s !== rec.seenText) { rec.seenText = s; rec.c.seen.textContent = s; }
  }

  // --- filter and sort ---
  function matches(b, q, cv) {
    if (view.status === 'online' && !b.online) return false;
    if (view.status === 'offline' && b.online) return false;
    if (view.group !== '0' && !b.groups.includes(Number(view.group))) return false;
    if (view.upd && !updateAvailable(b.firmware, cv)) return false;
    if (q) {
      const hay = (b.hostname + ' ' + b.id + ' ' + whereText(b) + ' ' + labelsText(b.labels) + ' ' + b.firmware).toLowerCase();
      for (const w of q.split(/\s+/)) if (w && !hay.includes(w)) return false;
    }
    return true;
  }

  function sortValue(b, key) {
    switch (key) {
      case 'name': return (b.hostname || b.id).toLowerCase();
      case 'where': return (b.line || '~') + String(b.address).padStart(4, '0') + b.url;
      case 'groups': return b.groups.length ? b.groups[0] : 99;
      case 'status': return b.online ? 0 : 1;
      case 'firmware': return b.firmware || '';
      case 'update': return sessionText(b);
      case 'seen': return -b.lastSeen;
      default: return b.id;
    }
  }

  function refilter() {
    const q = view.q.trim().toLowerCase();
    const cv = channelVersion();
    const list = [];
    for (const b of store.boards.values()) if (matches(b, q, cv)) list.push(b);
    const k = view.sortKey, d = view.sortDir;
    list.sort((x, y) => {
      const a = sortValue(x, k), c = sortValue(y, k);
      return (a < c ? -1 : a > c ? 1 : 0) * d || (x.id < y.id ? -1 : 1);
    });
    const next = list.map((b) => b.id);
    const shown = new Set(next);
    // Reorder only what moved: walk the wanted order and move a row only
    // when it is not where it should be.
    // The first build goes in as one fragment.
    const target = tbody.firstChild ? tbody : document.createDocumentFragment();
    let ref = target.firstChild;
    for (const id of next) {
      const rec = rows.get(id) || makeRow(store.boards.get(id));
      rec.tr.hidden = false;
      if (rec.tr === ref) ref = ref.nextSibling;
      else target.insertBefore(rec.tr, ref);
    }
    if (target !== tbody) tbody.appendChild(target);
    for (const [id, rec] of rows) {
      if (!store.boards.has(id)) { rec.tr.remove(); rows.delete(id); view.selected.delete(id); continue; }
      if (!shown.has(id)) rec.tr.hidden = true;
    }
    order = next;
    const now = Date.now();
    for (const id of next) updateRow(rows.get(id), store.boards.get(id), now);
    empty.hidden = next.length > 0;
    refilterAt = Date.now();
    for (const th of headRow.children) {
      const key = th.dataset.key;
      if (!key) continue;
      th.setAttribute('aria-sort', key === view.sortKey ? (view.sortDir > 0 ? 'ascending' : 'descending') : 'none');
    }
    syncSelection();
  }

  function syncSelection() {
    let online = 0;
    for (const b of store.boards.values()) if (b.online) online++;
    setText(summary, `${plural(store.boards.size, 'board')} · ${online} online · ${order.length} shown` + (canAct ? ` · ${view.selected.size} selected` : ''));
    if (!canAct) return;
    for (const [id, rec] of rows) {
      const on = view.selected.has(id);
      if (rec.cb.checked !== on) rec.cb.checked = on;
      toggleClass(rec.tr, 'selected', on);
    }
    const shownSel = order.filter((id) => view.selected.has(id)).length;
    selAll.checked = order.length > 0 && shownSel === order.length;
    selAll.indeterminate = shownSel > 0 && shownSel < order.length;
    setText(selCount, view.selected.size ? plural(view.selected.size, 'board') + ' selected' : 'Select boards to act on them');
    for (const b of bulkButtons) b.disabled = view.selected.size === 0;
    clearSel.disabled = view.selected.size === 0;
  }

  function sortBy(key) {
    if (view.sortKey === key) view.sortDir = -view.sortDir;
    else { view.sortKey = key; view.sortDir = 1; }
    refilter();
  }

  function fillGroups() {
    const gs = store.groups().map(([g]) => g);
    const want = ['0', ...gs.map(String)];
    const have = [...group.options].map((o) => o.value);
    if (want.join() === have.join()) return;
    clear(group);
    group.appendChild(h('option', { value: '0', text: 'All groups' }));
    for (const g of gs) group.appendChild(h('option', { value: String(g), text: 'Group ' + g }));
    group.value = want.includes(view.group) ? view.group : '0';
  }

  function fillChannels() {
    clear(channel);
    if (!store.channels.length) {
      channel.appendChild(h('option', { value: '', text: 'no channel' }));
      channel.disabled = true;
      view.channel = '';
      return;
    }
    channel.disabled = false;
    if (!store.channels.some((c) => c.name === view.channel)) {
      view.channel = (store.channels.find((c) => c.name === 'stable') || store.channels[0]).name;
    }
    for (const c of store.channels) channel.appendChild(h('option', { value: c.name, text: `${c.name} (${c.version || '?'})`, selected: c.name === view.channel }));
  }

  // --- events ---
  search.addEventListener('input', () => { view.q = search.value; refilter(); });
  status.addEventListener('change', () => { view.status = status.value; refilter(); });
  group.addEventListener('change', () => { view.group = group.value; refilter(); });
  upd.addEventListener('change', () => { view.upd = upd.checked; refilter(); });
  channel.addEventListener('change', () => { view.channel = channel.value; refilter(); });
  compact.addEventListener('change', () => {
    view.compact = compact.checked;
    localStorage.setItem('holo.console.compact', view.compact ? '1' : '0');
    toggleClass(page, 'compact', view.compact);
  });
  if (canAct) {
    tbody.addEventListener('change', (e) => {
      const cb = e.target;
      if (!cb.classList || !cb.classList.contains('sel')) return;
      if (cb.checked) view.selected.add(cb.dataset.id); else view.selected.delete(cb.dataset.id);
      syncSelection();
    });
    selAll.addEventListener('change', () => {
      if (selAll.checked) for (const id of order) view.selected.add(id);
      else for (const id of order) view.selected.delete(id);
      syncSelection();
    });
  }

  const flush = debounceFrame(() => {
    const now = Date.now();
    let refilterNeeded = false;
    for (const id of dirty) {
      const rec = rows.get(id), b = store.boards.get(id);
      if (!rec || !b) { refilterNeeded = true; continue; }
      const before = rec.tr.hidden ? 0 : 1;
      const q = view.q.trim().toLowerCase();
      if ((matches(b, q, channelVersion()) ? 1 : 0) !== before) refilterNeeded = true;
      if (!rec.tr.hidden) updateRow(rec, b, now);
    }
    dirty.clear();
    if (refilterNeeded) {
      // the board left or joined the filter: refilter, at most once a second
      const wait = 1000 - (Date.now() - refilterAt);
      if (wait <= 0) refilter();
      else setTimeout(() => { dirty.add(''); flush(); }, wait);
    }
  });

  const offs = [
    store.on('boards', () => { fillGroups(); refilter(); }),
    store.on('board', (id) => { dirty.add(id); flush(); }),
    store.on('channels', () => { fillChannels(); refilter(); }),
  ];
  const tick = setInterval(() => {
    const now = Date.now();
    for (const id of order) {
      const rec = rows.get(id), b = store.boards.get(id);
      if (rec && b) { const s = ago(b.lastSeen, now); if (s !== rec.seenText) { rec.seenText = s; rec.c.seen.textContent = s; } }
    }
  }, 5000);

  fillGroups();
  fillChannels();
  refilter();
  // Mark the first paint of the table (benchmarks and curious operators
  // read it with performance.getEntriesByName('holo:fleet-painted')).
  if (store.loaded && !performance.getEntriesByName('holo:fleet-painted').length) {
    requestAnimationFrame(() => requestAnimationFrame(() => performance.mark('holo:fleet-painted', { detail: { rows: order.length } })));
  }

  // --- bulk actions ---
  function ids() { return [...view.selected].filter((id) => store.boards.has(id)); }
  function who() { return plural(ids().length, 'board'); }

  function bulkLEDs() {
    const f = ledsForm('bulk');
    ctx.dialog('LEDs on ' + who(), f.el, [['Apply', () => { runAction(ctx, { boards: ids() }, 'leds', f.body(), 'LEDs'); }]]);
  }
  function bulkScreen() {
    const f = screenForm('bulk');
    ctx.dialog('Screen of ' + who(), f.el, [['Apply', () => { const a = f.action(); runAction(ctx, { boards: ids() }, a.kind, a.body, 'Screen'); }]]);
  }
  function bulkScene() {
    const f = sceneForm('bulk', []);
    ctx.dialog('Scene on ' + who(), f.el, [
      ['Apply scene', () => { runAction(ctx, { boards: ids() }, 'scene_apply', f.body(), 'Scene'); }],
      ['End running scene', () => { runAction(ctx, { boards: ids() }, 'scene_end', {}, 'End scene'); }, { class: 'ghost' }],
    ]);
  }
  function bulkHolo() {
    const f = holoForm('bulk');
    ctx.dialog('Holo of ' + who(), f.el, [['Go', () => { runAction(ctx, { boards: ids() }, 'holo', f.body(), 'Holo'); }]]);
  }
  function bulkLabels() {
    const set = h('input', { type: 'text', id: 'bulk-labels-set', placeholder: 'room=hall, zone=a', spellcheck: 'false' });
    const del = h('input', { type: 'text', id: 'bulk-labels-del', placeholder: 'zone', spellcheck: 'false' });
    const out = h('p', { class: 'result', role: 'alert' });
    const body = h('div', { class: 'form-grid' },
      h('div', { class: 'field' }, h('label', { for: set.id, text: 'Set labels (key=value, …)' }), set),
      h('div', { class: 'field' }, h('label', { for: del.id, text: 'Remove labels (keys, …)' }), del), out);
    ctx.dialog('Labels of ' + who(), body, [['Save', async () => {
      let add;
      try { add = parseLabels(set.value); } catch (e) { out.textContent = e.message; return false; }
      const rm = del.value.split(',').map((s) => s.trim()).filter(Boolean);
      const results = await eachBoard(ids(), async (id) => {
        const b = store.boards.get(id);
        const labels = Object.assign({}, b.labels, add);
        for (const k of rm) delete labels[k];
        const v = await ctx.api.patch('/v1/boards/' + encodeURIComponent(id) + '/labels', labels);
        store.upsert(v);
        store.emit('board', id);
      });
      const bad = results.filter((r) => r.error);
      if (bad.length) ctx.dialog('Labels: some boards refused', resultsTable(store, results));
      else ctx.toast(`Labels saved on ${plural(results.length, 'board')}.`, 'ok');
      refilter();
    }]]);
  }
  function bulkRestart() {
    ctx.dialog('Restart ' + who() + '?', h('p', { text: 'Each board restarts half a second after it answers; shows on them stop until they are back.' }), [['Restart', async () => {
      const results = await eachBoard(ids(), (id) => ctx.api.call(id, 'POST', '/restart', {}));
      if (results.some((r) => r.error)) ctx.dialog('Restart: some boards refused', resultsTable(store, results));
      else ctx.toast(`Restarting ${plural(results.length, 'board')}.`, 'ok');
    }, { class: 'danger' }]]);
  }
  function bulkRollout() {
    ctx.rolloutTarget = ids();
    ctx.go('#/firmware');
  }

  return { unmount() { for (const off of offs) off(); clearInterval(tick); } };
}
