// DMX: the gateway's sACN/Art-Net patch (which universe and address drives
// which board or group, by which profile) and the sources heard now, with
// their priority and rate (GET /v1/dmx/patch, refreshed every 2 s). A
// gateway without DMX inputs answers 404 and the page says so.

import { h, clear } from '../dom.js';

const REFRESH_MS = 2000;

function target(f) {
  if (f.group) return 'group ' + f.group;
  if (f.board) return 'board ' + f.board;
  if (f.line) return `line ${f.line} address ${f.line_address}`;
  return 'label ' + f.label;
}

export function mount(main, ctx) {
  const { api } = ctx;
  const status = h('p', { class: 'muted', id: 'dmx-status' });
  const fixtures = h('tbody', { id: 'dmx-fixtures' });
  const sources = h('tbody', { id: 'dmx-sources' });
  main.appendChild(h('section', { class: 'page page-dmx' },
    h('h1', { text: 'DMX' }), status,
    h('section', { class: 'card wide' }, h('h2', { text: 'Patch' }), h('div', { class: 'scroll' },
      h('table', { class: 'grid' }, h('thead', null, h('tr', null, ['Universe', 'Address', 'Profile', 'Target', 'Name'].map((t) => h('th', { text: t })))), fixtures))),
    h('section', { class: 'card wide' }, h('h2', { text: 'Sources' }), h('div', { class: 'scroll' },
      h('table', { class: 'grid' }, h('thead', null, h('tr', null, ['Universe', 'Protocol', 'Source', 'Address', 'Priority', 'Rate', ''].map((t) => h('th', { text: t })))), sources)))));

  async function load() {
    let v;
    try { v = await api.get('/v1/dmx/patch'); } catch (e) {
      status.textContent = e.status === 404 ? 'DMX inputs are off on this gateway (holo-gateway --sacn, --artnet).' : 'Refused: ' + (e.text || e.message);
      return;
    }
    status.textContent = (v.inputs || []).join(' · ') || 'DMX inputs on.';
    clear(fixtures);
    for (const f of (v.patch && v.patch.fixtures) || []) {
      const width = ((v.profiles[f.profile] || {}).channels || []).length;
      fixtures.appendChild(h('tr', null, h('td', { text: String(f.universe) }), h('td', { text: `${f.address}-${f.address + width - 1}` }),
        h('td', { text: f.profile }), h('td', { text: target(f) }), h('td', { text: f.name || '' })));
    }
    clear(sources);
    if (!(v.sources || []).length) sources.appendChild(h('tr', null, h('td', { colspan: 7, class: 'muted', text: 'No source heard.' })));
    for (const s of v.sources || []) {
      sources.appendChild(h('tr', null, h('td', { text: String(s.universe) }), h('td', { text: s.protocol }), h('td', { text: s.name }),
        h('td', { text: s.address }), h('td', { text: String(s.priority) }), h('td', { text: s.rate_hz.toFixed(1) + ' Hz' }),
        h('td', { text: s.winning ? 'winning' : '' })));
    }
  }
  load();
  const timer = setInterval(load, REFRESH_MS);
  return { unmount() { clearInterval(timer); } };
}
