// Sign-in: a bearer token (kept in this tab's sessionStorage only), or
// none where the gateway allows it (demo mode from loopback, a lab).

import { h, button } from '../dom.js';

let message = '';

export function setMessage(m) { message = m; }

export function mount(main, ctx) {
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', spellcheck: 'false', placeholder: 'holo_…', required: true });
  const out = h('p', { class: 'result', role: 'alert', text: message });
  message = '';
  const busy = (on) => { for (const b of form.querySelectorAll('button')) b.disabled = on; };

  async function signIn(token) {
    busy(true);
    out.textContent = 'Checking…';
    ctx.api.setToken(token);
    try {
      await ctx.enter();
      out.textContent = '';
      ctx.go('#/fleet');
    } catch (e) {
      ctx.api.setToken('');
      out.textContent = (token ? 'The gateway refused this token: ' : 'The gateway wants a token: ') + (e.text || e.message);
    } finally {
      busy(false);
    }
  }

  const form = h('form', { class: 'signin card', on: { submit: (e) => { e.preventDefault(); signIn(input.value.trim()); } } },
    h('h1', { text: 'Sign in to the holofleet console' }),
    h('p', { class: 'muted', text: 'Paste a bearer token made with “holo-gateway token create” or “holoctl token create”. It is kept in this browser tab only (sessionStorage) and sent to this gateway alone.' }),
    h('div', { class: 'field' }, h('label', { for: 'token', text: 'Token' }), input),
    h('div', { class: 'row' },
      h('button', { type: 'submit', class: 'primary', text: 'Sign in' }),
      button('Continue without a token', () => signIn(''), { class: 'ghost', title: 'Works in demo mode from this machine, or on a lab gateway' })),
    out);
  main.appendChild(h('section', { class: 'page page-signin' }, form));
  input.focus();
  return {};
}
