// The installation as code: the revision applied last, every assigned
// board's state (in sync, drifted and how, applying, unreachable, failed
// and why), the gateway sections the revision holds (the DMX patch, the
// cue lists: in sync, or drifted and how), the run applying a revision
// with its brakes, and the history with rollback. Applying again and
// rolling back show the plan first, sections included.
// Descriptions are written and applied with holoctl (docs/installation.md).

import { h, clear, setText, button } from '../dom.js';
import { dateTime, plural } from '../fmt.js';

const STATE_CLASS = { in_sync: 'ok', drifted: 'warn', applying: 'busy', unreachable: 'bad', failed: 'bad', needs_lan: 'warn', unassigned: 'idle' };
const RUN_CLASS = { running: 'busy', paused: 'warn', aborted: 'bad', done: 'ok' };

// diffLines turns a board's diff into kubectl-diff-like lines.
export function diffLines(d) {
  const out = [];
  if (!d) return out;
  for (const f of d.files || []) out.push({ mark: { add: '+', replace: '~', remove: '-' }[f.op] || '~', text: `file ${f.path} (${f.why || f.op})` });
  for (const s of d.scenes || []) out.push({ mark: s.op === 'remove' ? '-' : (s.why === 'absent' ? '+' : '~'), text: `scene ${s.name} (${s.why || s.op})` });
  for (const s of d.settings || []) out.push({ mark: '~', text: `${s.field}: ${JSON.stringify(s.from)} → ${JSON.stringify(s.to)}` });
  if (d.files_need_lan) out.push({ mark: '!', text: 'reached only over a line: files need the LAN' });
  return out;
}

// sectionLines turns a gateway section's changes into the same lines.
export function sectionLines(sec) {
  return ((sec && sec.changes) || []).map((c) => ({ mark: { add: '+', change: '~', remove: '-' }[c.op] || '~', text: c.item + (c.why ? ` (${c.why})` : '') }));
}

const SECTION_TITLE = { dmx: 'DMX patch', cuelists: 'Cue lists' };

export function mount(main, ctx) {
  const { api, store, session } = ctx;
  const revEl = h('p', { id: 'inst-revision', class: 'summary' });
  const runEl = h('div', { id: 'inst-run', class: 'row' });
  const countsEl = h('p', { id: 'inst-counts', class: 'muted', role: 'status' });
  const tbody = h('tbody');
  const histBody = h('tbody');
  const secBody = h('tbody');
  const secCard = h('section', { class: 'card wide', hidden: true }, h('h2', { text: 'Gateway sections' }), h('div', { class: 'scroll' },
    h('table', { class: 'grid', id: 'inst-sections' }, h('thead', null, h('tr', null, ['Section', 'State', 'What'].map((t) => h('th', { text: t })))), secBody)));
  const out = h('output', { class: 'result', role: 'status', id: 'inst-out' });
  const actions = h('div', { class: 'row', role: 'toolbar', 'aria-label': 'Installation actions' });
  const open = new Set(); // boards whose diff is shown
  let status = null;
  let timer = 0;
  let gone = false;

  main.appendChild(h('section', { class: 'page page-installation' },
    h('h1', { text: 'Installation' }), revEl, actions, runEl, out, countsEl,
    h('section', { class: 'card wide' }, h('h2', { text: 'Boards' }), h('div', { class: 'scroll' },
      h('table', { class: 'grid', id: 'inst-boards' }, h('thead', null, h('tr', null, ['Board', 'Profile', 'State', 'What'].map((t) => h('th', { text: t })))), tbody))),
    secCard,
    h('section', { class: 'card wide' }, h('h2', { text: 'History' }), h('div', { class: 'scroll' },
      h('table', { class: 'grid', id: 'inst-history' }, h('thead', null, h('tr', null, ['Revision', 'When', 'Who', 'Message', ''].map((t) => h('th', { text: t })))), histBody)))));

  function name(bid) { const b = store.boards.get(bid); return b ? (b.hostname || bid) : bid; }
  function say(text, ok) { out.className = 'result ' + (ok ? 'ok' : 'bad'); out.textContent = text; }

  // planDialog shows what applying revision n would change, then does it.
  async function planDialog(n, verb) {
    let rev, plan;
    try {
      rev = await api.get('/v1/installation/revisions/' + n);
      plan = await api.post('/v1/installation/plan', rev.description);
    } catch (e) { say(`Cannot plan revision ${n}: ${e.text || e.message}`); return; }
    const boards = plan.boards || [];
    const changing = boards.filter((b) => b.state !== 'in_sync');
    const sections = (plan.sections || []).filter((sec) => sec.state !== 'in_sync');
    const body = h('div', { class: 'inst-plan', id: 'inst-plan' },
      h('p', { text: changing.length ? `${plural(changing.length, 'board')} of ${boards.length} would change:` : `Every one of ${plural(boards.length, 'board')} already holds revision ${n}.` }),
      changing.map((b) => h('div', { class: 'inst-plan-board', dataset: { board: b.board } },
        h('strong', { text: `${name(b.board)} (${b.profile || '-'}): ${b.summary}` }),
        h('pre', { class: 'diff', text: diffLines(b.diff).map((l) => `${l.mark} ${l.text}`).join('\n') }))),
      sections.map((sec) => h('div', { class: 'inst-plan-section', dataset: { section: sec.section, state: sec.state } },
        h('strong', { text: `${SECTION_TITLE[sec.section] || sec.section}: ${sec.summary}` }),
        h('pre', { class: 'diff', text: sectionLines(sec).map((l) => `${l.mark} ${l.text}`).join('\n') }))));
    ctx.dialog(`${verb} revision ${n}`, body, [[verb, async () => {
      try {
        const r = await api.post('/v1/installation/rollback', { revision: n, message: `${verb.toLowerCase()} ${n} from the console` });
        say(`${verb}: revision ${r.revision.n}, run ${r.run.id} started.`, true);
        poll(300);
      } catch (e) { say(`${verb} refused: ${e.text || e.message}`); }
    }, { dataset: { confirm: 'apply' } }]]);
  }

  function renderActions() {
    clear(actions);
    actions.appendChild(button('Check now', () => poll(0), { dataset: { control: 'check' } }));
    if (status && session.can('install')) {
      actions.appendChild(button('Apply again', () => planDialog(status.revision.n, 'Apply'), { class: 'primary', dataset: { control: 'reapply' } }));
    }
  }

  function renderRun(run) {
    clear(runEl);
    if (!run) return;
    const done = run.done || 0;
    runEl.appendChild(h('span', { class: 'pill ' + (RUN_CLASS[run.state] || 'idle'), text: `run ${run.id}: ${run.state}` }));
    runEl.appendChild(h('progress', { max: run.boards || 1, value: done }));
    runEl.appendChild(h('span', { text: `${done} of ${plural(run.boards, 'board')} done` + (run.reason ? ' · ' + run.reason : '') }));
    const ctl = (label, need, verb, cls) => {
      if (!session.can(need)) return;
      runEl.appendChild(button(label, async () => {
        try { await api.post(`/v1/installation/runs/${run.id}/${verb}`, { reason: 'from the console' }); say(`${label}: done.`, true); poll(0); } catch (e) { say(`${label} refused: ${e.text || e.message}`); }
      }, { class: cls || '', dataset: { control: verb } }));
    };
    if (run.state === 'running') ctl('Pause', 'pause', 'pause');
    if (run.state === 'paused') ctl('Resume', 'resume', 'resume', 'primary');
    if (run.state === 'running' || run.state === 'paused') ctl('Abort', 'abort', 'abort', 'danger');
  }

  function render() {
    renderActions();
    if (!status) return;
    const r = status.revision;
    setText(revEl, `Revision ${r.n}, applied by ${r.who} at ${dateTime(Date.parse(r.when))}` + (r.message ? `: ${r.message}` : '') + (r.rollback_of ? ` (rollback to ${r.rollback_of})` : ''));
    renderRun(status.run);
    const counts = status.counts || {};
    setText(countsEl, Object.keys(counts).sort().map((k) => `${counts[k]} ${k.replace('_', ' ')}`).join(' · '));
    clear(tbody);
    for (const b of status.boards || []) {
      const lines = diffLines(b.diff);
      const row = h('tr', { dataset: { board: b.board, state: b.state }, class: 'phase-' + (STATE_CLASS[b.state] || 'idle') },
        h('td', null, h('a', { href: '#/board/' + encodeURIComponent(b.board), text: name(b.board) })),
        h('td', { text: b.profile || '' }),
        h('td', { class: 'phase' }, h('span', { class: 'pill ' + (STATE_CLASS[b.state] || 'idle'), text: b.state.replace('_', ' ') })),
        h('td', null, lines.length
          ? button(open.has(b.board) ? 'Hide' : b.summary, () => { if (open.has(b.board)) open.delete(b.board); else open.add(b.board); render(); }, { class: 'ghost small', dataset: { diff: b.board }, 'aria-expanded': String(open.has(b.board)) })
          : h('span', { text: b.error || b.summary })));
      tbody.appendChild(row);
      if (open.has(b.board) && lines.length) {
        tbody.appendChild(h('tr', { class: 'inst-diff' }, h('td', { colspan: '4' },
          h('pre', { class: 'diff', id: 'diff-' + b.board, text: lines.map((l) => `${l.mark} ${l.text}`).join('\n') }))));
      }
    }
    renderSections(status.sections || []);
  }

  // renderSections lists the revision's gateway sections; the card is
  // hidden when the revision holds none.
  function renderSections(sections) {
    clear(secBody);
    secCard.hidden = !sections.length;
    for (const sec of sections) {
      const lines = sectionLines(sec);
      const key = 'section:' + sec.section;
      secBody.appendChild(h('tr', { dataset: { section: sec.section, state: sec.state }, class: 'phase-' + (STATE_CLASS[sec.state] || 'idle') },
        h('td', { text: SECTION_TITLE[sec.section] || sec.section }),
        h('td', { class: 'phase' }, h('span', { class: 'pill ' + (STATE_CLASS[sec.state] || 'idle'), text: sec.state.replace('_', ' ') })),
        h('td', null, lines.length
          ? button(open.has(key) ? 'Hide' : sec.summary, () => { if (open.has(key)) open.delete(key); else open.add(key); render(); }, { class: 'ghost small', dataset: { sectionDiff: sec.section }, 'aria-expanded': String(open.has(key)) })
          : h('span', { text: sec.error || sec.summary }))));
      if (open.has(key) && lines.length) {
        secBody.appendChild(h('tr', { class: 'inst-diff' }, h('td', { colspan: '3' },
          h('pre', { class: 'diff', id: 'section-diff-' + sec.section, text: lines.map((l) => `${l.mark} ${l.text}`).join('\n') }))));
      }
    }
  }

  async function loadHistory() {
    const hs = await api.get('/v1/installation/history');
    clear(histBody);
    for (const r of (hs && hs.revisions) || []) {
      const cur = status && status.revision.n === r.n;
      histBody.appendChild(h('tr', { dataset: { revision: String(r.n) } },
        h('td', { text: String(r.n) + (cur ? ' (current)' : '') }),
        h('td', { text: dateTime(Date.parse(r.when)) }),
        h('td', { text: r.who }),
        h('td', { text: r.message || (r.rollback_of ? `rollback to ${r.rollback_of}` : '') }),
        h('td', null, !cur && session.can('install') ? button('Roll back to ' + r.n, () => planDialog(r.n, 'Roll back to'), { class: 'small', dataset: { rollback: String(r.n) } }) : null)));
    }
  }

  async function load() {
    try {
      status = await api.get('/v1/installation/status');
    } catch (e) {
      if (e.status === 404) {
        status = null;
        clear(tbody);
        setText(revEl, 'No installation applied yet: write one file and apply it with holoctl install apply -f installation.yaml (docs/installation.md).');
        renderActions();
        return;
      }
      say('Cannot read the installation: ' + (e.text || e.message));
      return;
    }
    render();
    try { await loadHistory(); } catch (e) { say('Cannot read the history: ' + (e.text || e.message)); }
  }

  // poll reads the status now (after ms) and again every 2 s while a run
  // is unfinished, every 15 s otherwise.
  function poll(ms) {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      await load();
      if (!gone) poll(status && status.run ? 2000 : 15000);
    }, ms);
  }
  poll(0);
  return { unmount() { gone = true; clearTimeout(timer); } };
}
