// Who is signed in and what that role may do.
//
// The gateway says who it takes the caller for (GET /v1/whoami: the
// token's name and role, or "loopback" in demo mode); the console offers
// only what that role may do, and the gateway refuses the rest anyway.

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
  install: 'admin', // apply a revision again, roll back
  tokens: 'admin',
  audit: 'admin',
};

export class Session {
  constructor(api) {
    this.api = api;
    this.name = '';
    this.role = '';
  }

  can(what) {
    const need = NEED[what] || 'admin';
    return ROLES.indexOf(this.role) >= ROLES.indexOf(need);
  }

  // identify finds the caller's name and role; it throws ApiError 401
  // when the gateway wants a (valid) token.
  async identify() {
    const w = await this.api.get('/v1/whoami');
    if (!w || !ROLES.includes(w.role)) {
      throw new Error('the gateway did not say who you are (GET /v1/whoami)');
    }
    this.name = w.name;
    this.role = w.role;
    return this;
  }
}
