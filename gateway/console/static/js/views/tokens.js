// Tokens (admins): list, create (the secret is shown once), revoke.

import { h, clear, field, select, button } from '../dom.js';
import { dateTime } from '../fmt.js';

export function mount(main, ctx) {
  const { api } = ctx;
  const tbody = h('tbody');
  const name = h('input', { type: 'text', id: 'tok-name', placeholder: 'stage-left', spellcheck: 'false' });
  const role = select(['viewer', 'operator', 'admin'], 'viewer', { id: 'tok-role' });
  const out = h('div', { class: 'result', role: 'status', id: 'tok-out' });
  main.appendChild(h('section', { class: 'page page-tokens' }, h('h1', { text: 'Tokens' }),
    h('section', { class: 'card wide' }, h('h2', { text: 'New token' }),
      h('div', { class: 'row' }, field('Name', name), field('Role', role), button('Create', create, { class: 'primary', id: 'tok-create' })), out),
    h('section', { class: 'card wide' }, h('h2', { text: 'Tokens' }), h('div', { class: 'scroll' },
      h('table', { class: 'grid' }, h('thead', null, h('tr', null, ['Name', 'Role', 'Created', ''].map((t) => h('th', { text: t })))), tbody)))));

  async function create() {
    clear(out);
    try {
      const r = await api.post('/v1/tokens', { name: name.value.trim(), role: role.value });
      out.className = 'result ok';
      out.appendChild(h('p', { text: `Token ${r.token.name} (${r.token.role}) made. Its secret is shown this once:` }));
      out.appendChild(h('code', { class: 'secret', text: r.secret }));
      load();
    } catch (e) { out.className = 'result bad'; out.textContent = 'Refused: ' + (e.text || e.message); }
  }

  async function load() {
    clear(tbody);
    let list = [];
    try { list = (await api.get('/v1/tokens')) || []; } catch (e) { tbody.appendChild(h('tr', null, h('td', { colspan: 4, class: 'bad', text: e.text || e.message }))); return; }
    for (const t of list) {
      tbody.appendChild(h('tr', null, h('td', { text: t.name }), h('td', { text: t.role }), h('td', { text: dateTime(t.created) }),
        h('td', null, button('Revoke', () => ctx.dialog(`Revoke ${t.name}?`, h('p', { text: 'Whoever uses it loses access at once.' }), [['Revoke', async () => {
          try { await api.del('/v1/tokens/' + encodeURIComponent(t.name)); load(); } catch (e) { ctx.toast('Refused: ' + (e.text || e.message), 'bad'); }
        }, { class: 'danger' }]]), { class: 'ghost small' }))));
    }
  }
  load();
  return {};
}
