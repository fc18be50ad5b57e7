// Firmware: the stored images (upload with progress), the release
// channels, the rollout builder (its dry run's answer is shown before a
// rollout can start) and the rollouts with their live progress.

import { h, clear, setText, field, select, button } from '../dom.js';
import { bytes, shortSha, dateTime, plural } from '../fmt.js';
import { LineWatch } from '../stream.js';
import { parseLabels } from '../widgets.js';

// signersText shows who signed an image, from the artifact record's trust
// ("trusted", "signed", "unsigned") and its signature blocks
// ({key_digest, valid, trusted}): the valid signers' short key digests,
// a trusted one marked.
export function signersText(a) {
  const valid = Array.isArray(a.signers) ? a.signers.filter((s) => s && s.valid) : [];
  const names = valid.map((s) => String(s.key_digest || '').slice(0, 16) + (s.trusted ? ' (trusted)' : ''));
  switch (a.trust) {
    case 'unsigned': return 'unsigned';
    case 'trusted': return names.length ? names.join(', ') : 'trusted';
    case 'signed': return (names.length ? names.join(', ') : 'signed') + ' · no trusted key';
  }
  return names.length ? names.join(', ') : '—';
}

export function phaseClass(p) {
  if (p === 'succeeded') return 'ok';
  if (p === 'failed' || p === 'timed_out' || p === 'rolled_back' || p === 'refused') return 'bad';
  if (p === 'pending' || p === 'skipped' || p === 'aborted' || p === 'reverted') return 'idle';
  return 'busy';
}

export function mount(main, ctx) {
  const { api, store, session } = ctx;
  let artifacts = [];
  const artBody = h('tbody');
  const chanBody = h('tbody');
  const rollBody = h('tbody');
  const watches = new Map(); // rollout id -> LineWatch
  const rollouts = new Map(); // id -> rollout

  // --- artifacts ---
  const artTable = h('table', { class: 'grid', id: 'artifacts' },
    h('thead', null, h('tr', null, ['Version', 'Name', 'SHA-256', 'Size', 'Signed by', 'Added', ''].map((t) => h('th', { text: t })))), artBody);
  let upload = null;
  if (session.can('upload')) {
    const file = h('input', { type: 'file', id: 'upload-file', accept: '.bin,application/octet-stream' });
    const bar = h('progress', { id: 'upload-progress', max: 100, value: 0 });
    const out = h('output', { class: 'result', id: 'upload-result', role: 'status' });
    const go = button('Upload', async () => {
      const f = file.files && file.files[0];
      if (!f) { out.textContent = 'Choose an image file first.'; return; }
      go.disabled = true;
      bar.value = 0;
      out.className = 'result';
      out.textContent = `Uploading ${f.name} (${bytes(f.size)})…`;
      try {
        const r = await api.upload(f, (done, total) => {
          bar.value = Math.floor(100 * done / total);
          out.textContent = `Uploading ${f.name}: ${bytes(done)} of ${bytes(total)}`;
          if (done === total) out.textContent = 'Verifying the image…';
        });
        bar.value = 100;
        const a = r.artifact || {};
        out.className = 'result ok';
        const signers = signersText(a);
        out.textContent = `${r.existed ? 'Already stored' : 'Stored'}: ${a.app ? a.app.project + ' ' + a.app.version : ''} ${shortSha(a.sha256)}` + (signers === '—' ? '' : ` · signed by: ${signers}`);
        await loadArtifacts();
      } catch (e) {
        out.className = 'result bad';
        out.textContent = 'Refused: ' + (e.text || e.message);
      } finally {
        go.disabled = false;
      }
    }, { class: 'primary', id: 'upload-go' });
    upload = h('div', { class: 'upload row' }, field('Image file', file), go, bar, out);
  }

  // --- channels ---
  const chanTable = h('table', { class: 'grid', id: 'channels' },
    h('thead', null, h('tr', null, ['Channel', 'Version', 'Image', 'Updated', ''].map((t) => h('th', { text: t })))), chanBody);
  let chanForm = null;
  const chanArt = select([], '', { id: 'channel-artifact' });
  if (session.can('channel')) {
    const name = h('input', { type: 'text', id: 'channel-name', value: 'stable', spellcheck: 'false', pattern: '[a-z0-9][a-z0-9._-]{0,31}' });
    const out = h('output', { class: 'result', role: 'status' });
    chanForm = h('div', { class: 'row' }, field('Channel', name), field('Image', chanArt), button('Set channel', async () => {
      try {
        await api.put('/v1/channels/' + encodeURIComponent(name.value.trim()), { sha256: chanArt.value });
        out.className = 'result ok';
        out.textContent = `Channel ${name.value.trim()} set.`;
        await store.loadChannels();
        renderChannels();
      } catch (e) { out.className = 'result bad'; out.textContent = 'Refused: ' + (e.text || e.message); }
    }, { id: 'channel-set' }), out);
  }

  // --- rollout builder ---
  const b = {
    name: h('input', { type: 'text', id: 'ro-name', placeholder: 'spring-update', spellcheck: 'false' }),
    artifact: select([], '', { id: 'ro-artifact' }),
    target: select([['all', 'every board'], ['groups', 'groups'], ['labels', 'boards with labels'], ['boards', 'these boards']], ctx.rolloutTarget ? 'boards' : 'all', { id: 'ro-target' }),
    groups: h('input', { type: 'text', id: 'ro-groups', placeholder: '1, 2' }),
    labels: h('input', { type: 'text', id: 'ro-labels', placeholder: 'room=hall', spellcheck: 'false' }),
    boards: h('textarea', { id: 'ro-boards', rows: 2, spellcheck: 'false', placeholder: 'board ids, comma separated' }),
    firmware: h('input', { type: 'text', id: 'ro-firmware', placeholder: 'only boards running this version' }),
    onlineOnly: h('input', { type: 'checkbox', id: 'ro-online' }),
    canaries: h('input', { type: 'text', id: 'ro-canaries', placeholder: 'board ids' }),
    waves: h('input', { type: 'text', id: 'ro-waves', placeholder: 'e.g. 2, 25%, 100%' }),
    inflight: h('input', { type: 'number', id: 'ro-inflight', min: 0, placeholder: '10' }),
    soak: h('input', { type: 'text', id: 'ro-soak', placeholder: '30s' }),
    action: select([['pause', 'pause'], ['revert', 'revert']], 'pause', { id: 'ro-action' }),
  };
  if (ctx.rolloutTarget) { b.boards.value = ctx.rolloutTarget.join(', '); ctx.rolloutTarget = null; }
  const dryOut = h('div', { class: 'dry', id: 'ro-dry', 'aria-live': 'polite' });
  const createBtn = session.can('rollout') ? button('Start rollout', createRollout, { class: 'primary', id: 'ro-create', disabled: true }) : null;
  let dryPlan = null;
  const builder = h('div', { class: 'builder' },
    h('div', { class: 'form-grid' },
      field('Name', b.name), field('Image', b.artifact), field('Target', b.target),
      field('Groups', b.groups), field('Labels', b.labels), field('Boards', b.boards),
      field('Only firmware', b.firmware), field('Online only', b.onlineOnly),
      field('Canaries (first wave)', b.canaries), field('Waves', b.waves, 'counts or percentages; empty: one wave'),
      field('Max in flight', b.inflight), field('Soak between waves', b.soak), field('On failure', b.action)),
    h('div', { class: 'row' }, button('Dry run', dryRun, { id: 'ro-dryrun' }), createBtn,
      session.can('rollout') ? null : h('span', { class: 'muted', text: 'Starting a rollout needs an admin.' })),
    dryOut);
  const showTarget = () => {
    const t = b.target.value;
    b.groups.closest('.field').hidden = t !== 'groups';
    b.labels.closest('.field').hidden = t !== 'labels';
    b.boards.closest('.field').hidden = t !== 'boards';
  };
  b.target.addEventListener('change', showTarget);
  for (const el of Object.values(b)) el.addEventListener('input', () => { dryPlan = null; if (createBtn) createBtn.disabled = true; });

  function plan() {
    const list = (s) => s.split(/[,\s]+/).map((x) => x.trim()).filter(Boolean);
    const p = { name: b.name.value.trim(), artifact: b.artifact.value, target: {} };
    const t = b.target.value;
    if (t === 'all') p.target.all = true;
    if (t === 'groups') p.target.groups = list(b.groups.value).map(Number);
    if (t === 'labels') p.target.labels = parseLabels(b.labels.value);
    if (t === 'boards') p.target.boards = list(b.boards.value);
    if (b.firmware.value.trim()) p.target.firmware = b.firmware.value.trim();
    if (b.onlineOnly.checked) p.target.online_only = true;
    const can = list(b.canaries.value);
    if (can.length) p.canaries = can;
    const waves = list(b.waves.value).map((w) => (w.endsWith('%') ? { percent: Number(w.slice(0, -1)) } : { count: Number(w) }));
    if (waves.length) p.waves = waves;
    if (b.inflight.value) p.max_in_flight = Number(b.inflight.value);
    if (b.soak.value.trim()) p.soak = b.soak.value.trim();
    p.thresholds = { action: b.action.value };
    return p;
  }

  function boardName(id) { const x = store.boards.get(id); return x ? `${x.hostname || id}` : id; }

  async function dryRun() {
    clear(dryOut);
    let p;
    try { p = plan(); } catch (e) { dryOut.appendChild(h('p', { class: 'bad', text: e.message })); return; }
    dryOut.appendChild(h('p', { class: 'muted', text: 'Asking the gateway…' }));
    try {
      const sel = await api.post('/v1/rollouts/dry-run', p);
      clear(dryOut);
      const waves = sel.waves || [];
      dryOut.appendChild(h('p', { class: 'summary', id: 'ro-dry-summary', text: `${plural(sel.boards || 0, 'board')} in ${plural(waves.length, 'wave')}` + ((sel.refused || []).length ? `; ${sel.refused.length} refused` : '') }));
      dryOut.appendChild(h('ol', { class: 'waves' }, waves.map((w, i) => h('li', null,
        h('strong', { text: `Wave ${i + 1} (${plural((w.boards || []).length, 'board')}): ` }),
        (w.boards || []).map((id) => h('span', { class: 'chip', text: boardName(id), title: id }))))));
      if ((sel.refused || []).length) {
        dryOut.appendChild(h('table', { class: 'grid refused' }, h('thead', null, h('tr', null, h('th', { text: 'Refused board' }), h('th', { text: 'Why' }))),
          h('tbody', null, sel.refused.map((r) => h('tr', null, h('td', { text: boardName(r.board) }), h('td', { text: r.reason }))))));
      }
      dryPlan = p;
      if (createBtn) createBtn.disabled = !(sel.boards > 0);
    } catch (e) {
      clear(dryOut);
      dryOut.appendChild(h('p', { class: 'bad', text: 'The plan was refused: ' + (e.text || e.message) }));
    }
  }

  async function createRollout() {
    if (!dryPlan) return;
    createBtn.disabled = true;
    try {
      const r = await api.post('/v1/rollouts', dryPlan);
      ctx.toast(`Rollout ${r.id} started.`, 'ok');
      ctx.go('#/rollout/' + encodeURIComponent(r.id));
    } catch (e) {
      dryOut.appendChild(h('p', { class: 'bad', text: 'Not started: ' + (e.text || e.message) }));
      createBtn.disabled = false;
    }
  }

  // --- rollouts ---
  const rollTable = h('table', { class: 'grid', id: 'rollouts' },
    h('thead', null, h('tr', null, ['Rollout', 'Image', 'State', 'Progress', 'Boards', 'Created'].map((t) => h('th', { text: t })))), rollBody);

  main.appendChild(h('section', { class: 'page page-firmware' },
    h('h1', { text: 'Firmware' }),
    h('section', { class: 'card wide' }, h('h2', { text: 'Images' }), upload, h('div', { class: 'scroll' }, artTable)),
    h('section', { class: 'card wide' }, h('h2', { text: 'Release channels' }), chanForm, h('div', { class: 'scroll' }, chanTable)),
    h('section', { class: 'card wide' }, h('h2', { text: 'New rollout' }), builder),
    h('section', { class: 'card wide' }, h('h2', { text: 'Rollouts' }), h('div', { class: 'scroll' }, rollTable))));
  showTarget();

  async function loadArtifacts() {
    try { artifacts = (await api.get('/v1/artifacts')) || []; } catch (e) { artifacts = []; }
    clear(artBody);
    if (!artifacts.length) artBody.appendChild(h('tr', null, h('td', { colspan: 7, class: 'muted', text: 'No image stored yet.' })));
    for (const a of artifacts) {
      artBody.appendChild(h('tr', { dataset: { sha: a.sha256 } },
        h('td', { text: a.app ? a.app.version : '?' }), h('td', { text: a.name || '' }),
        h('td', null, h('code', { text: shortSha(a.sha256), title: a.sha256 })), h('td', { text: bytes(a.size) }),
        h('td', { class: 'signers', text: signersText(a) }), h('td', { text: dateTime(a.added) }),
        h('td', null, session.can('upload') ? button('Delete', async () => {
          try { await api.del('/v1/artifacts/' + a.sha256); await loadArtifacts(); } catch (e) { ctx.toast('Delete refused: ' + (e.text || e.message), 'bad'); }
        }, { class: 'ghost small' }) : null)));
    }
    for (const s of [b.artifact, chanArt]) {
      const keep = s.value;
      clear(s);
      for (const a of artifacts) s.appendChild(h('option', { value: a.sha256, text: `${a.app ? a.app.version : '?'} · ${shortSha(a.sha256)} · ${a.name || ''}` }));
      if (artifacts.some((a) => a.sha256 === keep)) s.value = keep;
    }
  }

  function renderChannels() {
    clear(chanBody);
    if (!store.channels.length) chanBody.appendChild(h('tr', null, h('td', { colspan: 5, class: 'muted', text: 'No release channel.' })));
    for (const c of store.channels) {
      chanBody.appendChild(h('tr', null, h('td', { text: c.name }), h('td', { text: c.version }),
        h('td', null, h('code', { text: shortSha(c.sha256), title: c.sha256 })), h('td', { text: dateTime(c.updated) }),
        h('td', null, session.can('channel') ? button('Withdraw', async () => {
          try { await api.del('/v1/channels/' + encodeURIComponent(c.name)); await store.loadChannels(); renderChannels(); } catch (e) { ctx.toast('Refused: ' + (e.text || e.message), 'bad'); }
        }, { class: 'ghost small' }) : null)));
    }
  }

  function renderRollouts() {
    clear(rollBody);
    const list = [...rollouts.values()].sort((a, c) => (a.created < c.created ? 1 : -1));
    if (!list.length) rollBody.appendChild(h('tr', null, h('td', { colspan: 6, class: 'muted', text: 'No rollout yet.' })));
    for (const r of list) {
      const p = r.progress || {};
      const bar = h('progress', { max: 100, value: Math.round(p.percent || 0) });
      rollBody.appendChild(h('tr', { dataset: { id: r.id } },
        h('td', null, h('a', { href: '#/rollout/' + encodeURIComponent(r.id), text: (r.plan && r.plan.name) || r.id })),
        h('td', { text: r.image && r.image.app ? r.image.app.version : shortSha(r.image && r.image.sha256) }),
        h('td', null, h('span', { class: 'pill ' + stateClass(r.state), text: r.state })),
        h('td', null, bar, ` ${Math.round(p.percent || 0)}%`),
        h('td', { text: `${p.done || 0}/${p.boards || 0} done` + (p.failed ? `, ${p.failed} failed` : '') }),
        h('td', { text: dateTime(r.created) })));
    }
  }

  async function loadRollouts() {
    let list = [];
    try { list = (await api.get('/v1/rollouts')) || []; } catch (e) { list = []; }
    for (const r of list) {
      rollouts.set(r.id, r);
      if (!r.finished && !watches.has(r.id)) {
        // progress comes with each change: read the rollout again when its
        // watch reports, at most every half second
        let t = 0;
        const w = new LineWatch(api, '/v1/rollouts/' + encodeURIComponent(r.id) + '/events', {
          onItem: () => {
            if (t) return;
            t = setTimeout(async () => {
              t = 0;
              try { const nr = await api.get('/v1/rollouts/' + encodeURIComponent(r.id)); rollouts.set(r.id, nr); renderRollouts(); if (nr.finished) w.stop(); } catch (e) { /* next change */ }
            }, 500);
          },
        });
        w.done = () => (rollouts.get(r.id) || {}).finished;
        watches.set(r.id, w.start());
      }
    }
    renderRollouts();
  }

  const offCh = store.on('channels', renderChannels);
  loadArtifacts();
  renderChannels();
  loadRollouts();
  return { unmount() { offCh(); for (const w of watches.values()) w.stop(); } };
}

export function stateClass(s) {
  return { running: 'busy', paused: 'warn', aborted: 'bad', reverting: 'warn', reverted: 'bad', done: 'ok' }[s] || 'idle';
}
