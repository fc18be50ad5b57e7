// Who is signed in and what that role may do.
//
// The fleet API has no call that names the caller yet, so the console asks
// GET /v1/whoami first (used when a gateway serves it: {name, role}) and
// otherwise finds the role by probing calls that change nothing: a viewer
// may list boards, an operator may call a board (a read of a board that
// does not exist: 404 for an operator, 403 for a viewer), an admin may list
// tokens.

import { ApiError } from './api.js';

export const ROLES = ['viewer', 'operator', 'admin'];

// NEED is the least role of each thing the console offers, as the
// gateway's policy has it (gateway/auth).
export const NEED = {
  act: 'operator', // show actions: LEDs, screen, holo, scenes
  labels: 'operator',
  call: 'operator', // reading a board's own state (GET /leds, /ota, /link ...)
  pause: 'operator',
  abort: 'operator',
  restart: 'admin',
  upload: 'admin',
  channel: 'admin',
  rollout: 'admin', // create
  resume: 'admin',
  revert: 'admin',
  tokens: 'admin',
  audit: 'admin',
};

export class Session {
  constructor(api) {
    this.api = api;
    this.name = '';
    this.role = '';
    this.how = '';
  }

  can(what) {
    const need = NEED[what] || 'admin';
    return ROLES.indexOf(this.role) >= ROLES.indexOf(need);
  }

  // identify finds the caller's name and role; it throws ApiError 401
  // when the gateway wants a (valid) token.
  async identify() {
    const token = this.api.token;
    this.name = token ? 'token …' + token.slice(-4) : 'loopback, no token';
    try {
      const w = await this.api.get('/v1/whoami');
      if (w && ROLES.includes(w.role)) {
        this.name = w.name || this.name;
        this.role = w.role;
        this.how = 'whoami';
        return this;
      }
    } catch (e) {
      if (e.status === 401) throw e;
    }
    await this.api.get('/v1/boards?ids=-'); // viewer at least; 401 throws
    this.how = 'probe';
    const admin = await this.allowed(() => this.api.get('/v1/tokens'));
    if (admin) { this.role = 'admin'; return this; }
    const op = await this.allowed(() => this.api.post('/v1/boards/-/call', { method: 'GET', path: '/info' }));
    this.role = op ? 'operator' : 'viewer';
    return this;
  }

  // allowed runs a probe: false when the gateway refused for the role.
  async allowed(fn) {
    try {
      await fn();
      return true;
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      if (e.status === 401) throw e;
      return e.status !== 403;
    }
  }
}
