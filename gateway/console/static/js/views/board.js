// One board: its live state drawn (LED strip, screen, holo, scene), its
// happenings as they arrive, link counters, firmware slots, and the
// operator's actions, each showing the board's own answer.

import { h, clear, setText, toggleClass, field, button } from '../dom.js';
import { ago, clock, oneLine, parseJSON, bytes, dateTime } from '../fmt.js';
import { EventStream } from '../stream.js';
import { ledStrip, screenView, holoPad, ledsForm, screenForm, holoForm, sceneForm, outcome, labelsText, parseLabels } from '../widgets.js';

function card(title, ...body) {
  return h('section', { class: 'card' }, h('h2', { text: title }), ...body);
}

// stateCard is a card of live state: a fixed height, so the cards below
// never move when what it says grows or shrinks.
function stateCard(title, ...body) {
  return h('section', { class: 'card state' }, h('h2', { text: title }), ...body);
}

export function mount(main, ctx, [id]) {
  const { store, session, api } = ctx;
  const b0 = store.boards.get(id);
  if (!b0) {
    main.appendChild(h('section', { class: 'page' }, h('h1', { text: 'No such board' }),
      h('p', { text: `The gateway knows no board with id ${id}.` }), h('a', { href: '#/fleet', text: 'Back to the fleet' })));
    return {};
  }
  const canAct = session.can('act');
  const canCall = session.can('call');

  // --- head ---
  const title = h('h1', { class: 'board-title' });
  const idEl = h('code', { class: 'muted' });
  const stateEl = h('span', { class: 'pill' });
  const facts = h('dl', { class: 'facts' });
  const head = h('div', { class: 'board-head' }, h('a', { href: '#/fleet', class: 'back', text: '← Fleet' }), title, idEl, stateEl);

  // --- live state ---
  const strip = ledStrip();
  const ledsText = h('p', { class: 'muted state-line' });
  const screen = screenView();
  const screenText = h('p', { class: 'muted state-line' });
  const holo = holoPad();
  const holoText = h('p', { class: 'muted state-line' });
  const sceneText = h('p', { class: 'state-line' });
  const scenesText = h('p', { class: 'muted state-line' });
  const systemText = h('p', { class: 'muted state-line' });

  const happList = h('ol', { class: 'happenings', 'aria-live': 'off' });
  const happEmpty = h('p', { class: 'muted', text: 'No happenings seen yet.' });
  const linkBox = h('div', { class: 'kv-wrap' }, h('p', { class: 'muted', text: canCall ? 'Reading…' : 'Reading a board\'s link counters needs an operator.' }));
  const slotsBox = h('div', { class: 'kv-wrap' }, h('p', { class: 'muted', text: canCall ? 'Reading…' : 'Reading a board\'s slots needs an operator.' }));

  const cards = h('div', { class: 'cards' },
    stateCard('LED strip', strip.el, ledsText),
    stateCard('Screen', h('div', { class: 'disc-wrap' }, screen.el), screenText),
    stateCard('Holo', holo.el, holoText),
    stateCard('Scene', sceneText, scenesText, systemText),
    h('section', { class: 'card wide' }, h('h2', { text: 'Happenings' }), h('div', { class: 'happ-wrap' }, happEmpty, happList)),
    canAct ? actionsCard() : null,
    card('Link', linkBox, canCall ? button('Read again', readLink, { class: 'ghost small' }) : null),
    card('Firmware slots', slotsBox, canCall ? button('Read again', readOta, { class: 'ghost small' }) : null),
    card('Facts', facts));
  main.appendChild(h('section', { class: 'page page-board' }, head, cards));

  // --- rendering ---
  let lastHapp = -1;
  let ver = -1;
  function render() {
    const b = store.boards.get(id);
    if (!b || b.ver === ver) return;
    ver = b.ver;
    setText(title, b.hostname || b.id);
    setText(idEl, b.id);
    setText(stateEl, b.online ? 'online' : 'offline' + (b.offline_reason ? ': ' + b.offline_reason : ''));
    stateEl.className = 'pill ' + (b.online ? 'ok' : 'bad');
    renderFacts(b);
    const L = (k) => (b.live[k] ? b.live[k].data : null);
    const leds = L('leds');
    strip.update(leds);
    setText(ledsText, leds ? `${leds.mode} · ${leds.colour} · ${leds.brightness}% · ${leds.count} LEDs` + (leds.loop ? ' · loop' : '') : 'no report yet');
    const sc = L('screen');
    screen.update(sc);
    setText(screenText, sc ? `backlight ${sc.backlight}%` + (sc.loop ? ' · loop' : '') : 'no report yet');
    const ho = L('holo');
    holo.update(ho);
    setText(holoText, ho ? `x ${(+ho.x || 0).toFixed(2)} · y ${(+ho.y || 0).toFixed(2)} · ${ho.motion || 'off'}${ho.moving ? ' (moving)' : ''} · ${ho.ready ? 'ready' : (ho.reason || 'not ready')}` : 'no report yet');
    holoText.title = holoText.textContent; // the line is cut at two lines
    const scene = b.live.scene ? L('scene') : (L('scenes') && L('scenes').active) || null;
    setText(sceneText, scene && scene.name ? `running: ${scene.name} · then ${scene.then || 'stay'}` + (scene.remaining_s != null ? ` · ${Math.ceil(scene.remaining_s)} s left` : '') : 'no scene running to its end');
    const saved = L('scenes');
    setText(scenesText, saved && Array.isArray(saved.scenes) ? 'saved: ' + (saved.scenes.map((s) => s.name || s).join(', ') || 'none') : '');
    const sys = L('system');
    setText(systemText, sys ? `up ${sys.uptime_s} s · heap ${bytes(sys.heap_free)} free · rssi ${sys.rssi} dBm` : '');
    renderHappenings(b);
    renderLink(L('link'));
    renderOta(L('ota-full'), L('ota'));
  }

  function renderFacts(b) {
    clear(facts);
    const add = (k, v) => { facts.appendChild(h('dt', { text: k })); facts.appendChild(h('dd', { text: v })); };
    add('Firmware', b.firmware || '—');
    add('Line', b.line ? `${b.line} #${b.address}` : '—');
    add('LAN', b.url || '—');
    add('Groups', b.groups.join(', ') || '—');
    add('Labels', labelsText(b.labels) || '—');
    add('Reached by', (b.transports || []).join(', ') || '—');
    add('Last seen', ago(b.lastSeen) + (b.lastSeen ? ' (' + dateTime(b.lastSeen) + ')' : ''));
  }

  function renderHappenings(b) {
    const hs = b.happenings;
    const newest = hs.length ? hs[hs.length - 1].n : 0;
    if (newest === lastHapp) return;
    // add the new ones on top (rows have a fixed height; the list keeps
    // the reader's place when scrolled)
    const fresh = hs.filter((e) => e.n > lastHapp);
    lastHapp = newest;
    const wrap = happList.parentElement;
    const keep = wrap.scrollTop > 0;
    for (const e of fresh) {
      const d = parseJSON(e.data);
      happList.insertBefore(h('li', { dataset: { n: String(e.n) } },
        h('time', { text: clock(Date.parse(e.time)) }), h('span', { class: 'kind', text: e.kind }),
        h('span', { class: 'seq', text: '#' + e.seq }), h('span', { class: 'data', text: oneLine(d) })), happList.firstChild);
      if (keep) wrap.scrollTop += 26;
    }
    while (happList.children.length > 100) happList.lastChild.remove();
    happEmpty.hidden = happList.children.length > 0;
  }

  function renderLink(link) {
    if (!link) return;
    clear(linkBox);
    const run = link.running || {};
    const rows = [['mode', run.mode], ['address', run.address], ['groups', (run.groups || []).join(', ')], ['baud', run.baud], ['transport', link.transport]];
    for (const [k, v] of Object.entries(link.counters || {})) rows.push([k.replace(/_/g, ' '), v]);
    linkBox.appendChild(h('table', { class: 'kv' }, h('tbody', null, rows.map(([k, v]) => h('tr', null, h('th', { text: k }), h('td', { text: v === undefined ? '—' : String(v) }))))));
  }

  function renderOta(full, sess) {
    if (!full && !sess) return;
    clear(slotsBox);
    if (full && Array.isArray(full.slots)) {
      slotsBox.appendChild(h('table', { class: 'grid slots' },
        h('thead', null, h('tr', null, ['Slot', 'Version', 'State', ''].map((t) => h('th', { text: t })))),
        h('tbody', null, full.slots.map((s) => h('tr', null,
          h('td', { text: s.label }), h('td', { text: s.app ? s.app.version : '—' }), h('td', { text: s.state || 'empty' }),
          h('td', { text: [s.running ? 'running' : '', s.boots ? 'boots' : '', s.next ? 'next' : ''].filter(Boolean).join(', ') }))))));
    }
    const s = sess || (full && full.session);
    if (s && s.state) {
      let t = 'update session: ' + s.state;
      if (s.total) t += ` · ${bytes(s.bytes)} of ${bytes(s.total)}`;
      if (s.error) t += ' · ' + s.error;
      slotsBox.appendChild(h('p', { class: 'muted', text: t }));
    }
  }

  // --- actions ---
  function actionsCard() {
    const out = h('output', { class: 'result', id: 'board-result', role: 'status' });
    const show = (text, ok) => { out.textContent = text; out.className = 'result ' + (ok ? 'ok' : 'bad'); };
    async function act(kind, body, what) {
      show(what + '…', true);
      try {
        const r = await api.post('/v1/actions', { selector: { boards: [id] }, kind, body });
        const res = (r.results || [])[0];
        if (!res) { show(what + ': no result', false); return; }
        const o = outcome(res);
        show(o.ok ? `${what}: ${o.text}` : `${what}: the board refused: ${o.text}`, o.ok);
      } catch (e) {
        show(`${what}: refused: ${e.text || e.message}`, false);
      }
    }
    const leds = ledsForm('board');
    const scr = screenForm('board');
    const ho = holoForm('board');
    const sc = sceneForm('board', savedScenes());
    const labels = h('input', { type: 'text', id: 'board-labels', value: labelsText(store.boards.get(id).labels), spellcheck: 'false' });
    const forms = [
      h('div', { class: 'act' }, h('h3', { text: 'LEDs' }), leds.el, button('Apply LEDs', () => act('leds', leds.body(), 'LEDs'), { id: 'board-leds-apply' })),
      h('div', { class: 'act' }, h('h3', { text: 'Screen' }), scr.el, button('Apply screen', () => { const a = scr.action(); act(a.kind, a.body, 'Screen'); }, { id: 'board-screen-apply' })),
      h('div', { class: 'act' }, h('h3', { text: 'Holo' }), ho.el, button('Move holo', () => act('holo', ho.body(), 'Holo'), { id: 'board-holo-apply' })),
      h('div', { class: 'act' }, h('h3', { text: 'Scene' }), sc.el,
        h('div', { class: 'row' }, button('Apply scene', () => act('scene_apply', sc.body(), 'Scene'), { id: 'board-scene-apply' }),
          button('End scene', () => act('scene_end', {}, 'End scene'), { class: 'ghost' }))),
    ];
    if (session.can('labels')) {
      forms.push(h('div', { class: 'act' }, h('h3', { text: 'Labels' }), field('key=value, …', labels),
        button('Save labels', async () => {
          let map;
          try { map = parseLabels(labels.value); } catch (e) { show(e.message, false); return; }
          try {
            const v = await api.patch('/v1/boards/' + encodeURIComponent(id) + '/labels', map);
            store.upsert(v);
            store.emit('board', id);
            show('Labels saved.', true);
          } catch (e) { show('Labels refused: ' + (e.text || e.message), false); }
        }, { id: 'board-labels-save' })));
    }
    if (session.can('restart')) {
      forms.push(h('div', { class: 'act' }, h('h3', { text: 'Restart' }), button('Restart board…', () => {
        ctx.dialog('Restart ' + store.label(store.boards.get(id)) + '?', h('p', { text: 'The board restarts half a second after it answers.' }), [['Restart', async () => {
          try {
            const r = await api.call(id, 'POST', '/restart', {});
            show(`Restarting in ${r && r.restart_in_ms} ms.`, true);
          } catch (e) { show('Restart refused: ' + (e.text || e.message), false); }
        }, { class: 'danger' }]]);
      }, { class: 'danger' })));
    }
    return h('section', { class: 'card wide actions' }, h('h2', { text: 'Actions' }), h('div', { class: 'acts' }, forms), out);
  }

  function savedScenes() {
    const b = store.boards.get(id);
    const s = b && b.live.scenes && b.live.scenes.data;
    return s && Array.isArray(s.scenes) ? s.scenes.map((x) => x.name || x) : [];
  }

  // --- reads (operators) and the board's replayed recent events ---
  // A read is numbered by the events that had arrived when it was sent
  // (store.setLive): an event that comes while it is on its way wins.
  async function read(path, kind) {
    const asOf = store.lastN;
    try { store.setLive(id, kind, await api.call(id, 'GET', path), asOf); } catch (e) { /* shown as no report */ }
  }
  function readLink() { return read('/link', 'link'); }
  async function readOta() {
    const asOf = store.lastN;
    try {
      const o = await api.call(id, 'GET', '/ota');
      store.setLive(id, 'ota-full', o, asOf);
      if (o && o.session) store.setLive(id, 'ota', o.session, asOf);
    } catch (e) {
      clear(slotsBox);
      slotsBox.appendChild(h('p', { class: 'bad', text: 'Refused: ' + (e.text || e.message) }));
    }
  }
  if (canCall) {
    read('/leds', 'leds'); read('/screen', 'screen'); read('/holo', 'holo'); read('/scenes', 'scenes');
    readLink(); readOta();
  }
  const after = store.lastN > 4000 ? store.lastN - 4000 : 1;
  const replay = new EventStream(api, { query: 'ids=' + encodeURIComponent(id), after, onEvent: (ev) => store.apply(ev, true) }).start();

  const off = store.on('board', (bid) => { if (bid === id) requestAnimationFrame(render); });
  const tick = setInterval(() => { ver = -1; render(); }, 5000);
  render();
  return { unmount() { off(); replay.stop(); clearInterval(tick); } };
}
