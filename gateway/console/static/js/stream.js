// The fleet's live event stream: GET /v1/events as Server-Sent Events,
// read with fetch (EventSource cannot send the bearer token). After a drop
// it reconnects with Last-Event-ID set to the last event number it saw, so
// the gateway replays what was missed; events the gateway no longer keeps
// are reported as a gap (onGap) so the page can reload what it shows.
// Another stream of numbered events (the cue lists', /v1/cuelists/events)
// is read the same way with opts.path; with opts.resume false it starts
// afresh at each connection (the gateway keeps no past events for it: the
// page reads the state again when onStatus says live).

const BACKOFF_MS = [500, 1000, 2000, 4000, 5000];
// A stream that says nothing for this long is taken as dead (boards report
// every 15 s, so a quiet minute means a cut the socket did not notice).
const QUIET_MS = 60000;

export class EventStream {
  // opts: query (string after '?', filters), after (first event number to
  // resume from), contiguous (the stream is unfiltered, so numbers run
  // without holes and a hole is a loss), onEvent(ev), onStatus(st),
  // onGap(count); path (default /v1/events), resume (default true).
  constructor(api, opts) {
    this.api = api;
    this.path = opts.path || '/v1/events';
    this.resume = opts.resume !== false;
    this.query = opts.query || '';
    this.lastN = opts.after || 0;
    this.contiguous = !!opts.contiguous;
    this.onEvent = opts.onEvent || (() => {});
    this.onStatus = opts.onStatus || (() => {});
    this.onGap = opts.onGap || (() => {});
    this.stopped = false;
    this.ctrl = null;
    this.attempt = 0;
    this.status = { state: 'connecting' };
  }

  start() { this.loop(); return this; }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
  }

  setStatus(st) {
    this.status = st;
    this.onStatus(st);
  }

  async loop() {
    while (!this.stopped) {
      const since = this.status.state === 'down' ? this.status.since : Date.now();
      try {
        await this.once();
        if (this.stopped) return;
        throw new Error('the gateway closed the stream');
      } catch (e) {
        if (this.stopped) return;
        if (e && e.denied) {
          this.setStatus({ state: 'denied', error: e.message });
          return;
        }
        const wait = BACKOFF_MS[Math.min(this.attempt, BACKOFF_MS.length - 1)];
        this.attempt++;
        this.setStatus({ state: 'down', since, error: e && e.message ? e.message : String(e), retryAt: Date.now() + wait, attempt: this.attempt, lastN: this.lastN });
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  async once() {
    this.ctrl = new AbortController();
    const ctrl = this.ctrl;
    const headers = this.api.headers({ Accept: 'text/event-stream' });
    if (!this.resume) this.lastN = 0;
    if (this.lastN > 0) headers['Last-Event-ID'] = String(this.lastN);
    const path = this.path + (this.query ? '?' + this.query : '');
    let res;
    try {
      res = await fetch(path, { headers, cache: 'no-store', signal: ctrl.signal });
    } catch (e) {
      throw new Error('cannot reach the gateway');
    }
    if (res.status === 401 || res.status === 403) {
      const err = new Error('the gateway refused the event stream (' + res.status + ')');
      err.denied = true;
      throw err;
    }
    if (!res.ok || !res.body) throw new Error('event stream: HTTP ' + res.status);
    const resumed = this.lastN;
    const wasDown = this.status.state === 'down';
    this.attempt = 0;
    this.setStatus({ state: 'live', resumedFrom: wasDown ? resumed : 0, since: Date.now() });

    let quiet = setTimeout(() => ctrl.abort(), QUIET_MS);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let msg = { event: '', data: [], id: '' };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        clearTimeout(quiet);
        quiet = setTimeout(() => ctrl.abort(), QUIET_MS);
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          let line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line === '') {
            if (msg.data.length) this.dispatch(msg);
            msg = { event: '', data: [], id: '' };
            continue;
          }
          if (line[0] === ':') continue;
          const c = line.indexOf(':');
          const name = c < 0 ? line : line.slice(0, c);
          let val = c < 0 ? '' : line.slice(c + 1);
          if (val[0] === ' ') val = val.slice(1);
          if (name === 'data') msg.data.push(val);
          else if (name === 'event') msg.event = val;
          else if (name === 'id') msg.id = val;
        }
      }
    } catch (e) {
      if (e && e.fromServer) throw e;
      if (ctrl.signal.aborted && !this.stopped) throw new Error('the event stream went quiet');
      throw new Error('the event stream was cut (' + (e.message || e) + ')');
    } finally {
      clearTimeout(quiet);
    }
  }

  dispatch(msg) {
    const data = msg.data.join('\n');
    if (msg.event === 'error') {
      // The gateway cut us off (we fell behind): resume from lastN.
      let m = data;
      try { m = JSON.parse(data).message || data; } catch { /* as is */ }
      const err = new Error('the gateway ended the stream: ' + m);
      err.fromServer = true;
      throw err;
    }
    let ev;
    try { ev = JSON.parse(data); } catch { return; }
    const n = Number(ev.n);
    if (!(n > 0)) return;
    if (n <= this.lastN) return; // already seen
    if (this.contiguous && this.lastN > 0 && n > this.lastN + 1) this.onGap(n - this.lastN - 1, this.lastN, n);
    this.lastN = n;
    ev.n = n;
    this.onEvent(ev);
  }
}

// LineWatch follows a newline-delimited JSON stream whose items carry a
// number n (a rollout's watch), resuming with ?after= the last n after a
// drop, until stop() or until done() says the stream is complete.
export class LineWatch {
  constructor(api, path, opts) {
    this.api = api;
    this.path = path;
    this.lastN = opts.after || 0;
    this.onItem = opts.onItem;
    this.onStatus = opts.onStatus || (() => {});
    this.stopped = false;
    this.ctrl = null;
  }

  start() { this.loop(); return this; }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
  }

  async loop() {
    let attempt = 0;
    while (!this.stopped) {
      this.ctrl = new AbortController();
      const sep = this.path.includes('?') ? '&' : '?';
      try {
        this.onStatus({ state: 'live' });
        await this.api.lines(this.path + sep + 'after=' + this.lastN, this.ctrl.signal, (item) => {
          attempt = 0;
          const n = Number(item.n);
          if (n > 0 && n <= this.lastN) return;
          if (n > 0) this.lastN = n;
          this.onItem(item);
        });
        if (this.stopped) return;
        if (this.done && this.done()) { this.onStatus({ state: 'ended' }); return; }
      } catch (e) {
        if (this.stopped) return;
        if (e && (e.status === 401 || e.status === 403 || e.status === 404)) {
          this.onStatus({ state: 'denied', error: e.text || e.message });
          return;
        }
        this.onStatus({ state: 'down', error: e.message || String(e) });
      }
      const wait = BACKOFF_MS[Math.min(attempt++, BACKOFF_MS.length - 1)];
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}
