// The console's picture of the fleet: the boards (GET /v1/boards), kept
// live by the event stream, and the recent events. Views subscribe to
// changes; nothing here polls boards.

import { EventStream } from './stream.js';
import { parseJSON } from './fmt.js';

const EVENTS_KEPT = 2000;
const HAPPENINGS_KEPT = 100;

// The console's one stale-read rule. What a view shows carries the
// number n of the newest change it reflects: a change (an event, an
// operation) is numbered by its own order, and a read by readAt(n), n
// the newest change known when the read was sent. Its reply is newer than
// every change that had arrived by then, and older than any that arrives
// while it is on its way, which may report what the board did after it
// answered. Numbering a reply by what is known at its arrival instead let
// a slow read's old state overwrite a change that had just arrived, for
// good.
export function readAt(n) { return n + 0.5; }

// supersedes says whether what is numbered n may replace cur (a record
// with its number n, or nothing yet): only when it is newer.
export function supersedes(n, cur) { return !cur || cur.n < n; }

export class Store {
  constructor(api) {
    this.api = api;
    this.boards = new Map();
    this.events = []; // the fleet stream since the page loaded, oldest first
    this.listeners = { boards: new Set(), board: new Set(), event: new Set(), status: new Set(), gap: new Set(), channels: new Set() };
    this.channels = [];
    this.stream = null;
    this.status = { state: 'connecting' };
    this.reloadTimer = 0;
    this.refetch = new Map(); // board id -> timers
    this.loaded = false;
    this.gaps = 0;
  }

  on(what, fn) { this.listeners[what].add(fn); return () => this.listeners[what].delete(fn); }
  emit(what, arg) { for (const fn of this.listeners[what]) { try { fn(arg); } catch (e) { console.error(e); } } }

  get lastN() { return this.stream ? this.stream.lastN : 0; }

  // loadBoards reads the board list and merges it with what is known.
  async loadBoards() {
    const list = await this.api.get('/v1/boards');
    const seen = new Set();
    for (const v of list || []) {
      seen.add(v.id);
      this.upsert(v);
    }
    for (const id of [...this.boards.keys()]) if (!seen.has(id)) this.boards.delete(id);
    this.loaded = true;
    this.emit('boards');
  }

  async loadChannels() {
    try {
      this.channels = (await this.api.get('/v1/channels')) || [];
    } catch (e) {
      this.channels = [];
    }
    this.emit('channels');
  }

  upsert(v) {
    let b = this.boards.get(v.id);
    if (!b) {
      b = { id: v.id, live: {}, happenings: [], lastSeen: 0, ver: 0 };
      this.boards.set(v.id, b);
    }
    b.hostname = v.hostname || '';
    b.address = v.address || 0;
    b.line = v.line || '';
    b.url = v.url || '';
    b.groups = v.groups || [];
    b.labels = v.labels || {};
    b.online = !!v.online;
    b.offline_reason = v.offline_reason || '';
    b.firmware = v.firmware || '';
    b.transports = v.transports || [];
    const ls = Date.parse(v.last_seen);
    if (ls > b.lastSeen && ls > 0) b.lastSeen = ls;
    b.ver++;
    return b;
  }

  async reloadBoard(id) {
    try {
      const v = await this.api.get('/v1/boards/' + encodeURIComponent(id));
      const known = this.boards.has(id);
      const b = this.boards.get(id);
      if (b && b.infoWatch && v.firmware !== b.infoWatch.fw) {
        // it runs the new image: the update session it showed is over
        const o = b.live.ota && b.live.ota.data;
        if (o && o.state === 'active') delete b.live.ota;
      }
      this.upsert(v);
      if (!known) this.emit('boards');
      else this.emit('board', id);
    } catch (e) { /* the next event or reload brings it */ }
  }

  // soon reads a board's record again after it came back: the gateway
  // reads its GET /info again (a new firmware version, after an update)
  // once it reaches the board again, and no event says when. The board's
  // first state reports after the restart come right after that read, so
  // each one (for a minute) and three timers trigger a read.
  soon(id) {
    const b = this.boards.get(id);
    if (!b) return;
    for (const t of this.refetch.get(id) || []) clearTimeout(t);
    b.infoWatch = { until: Date.now() + 60000, fw: b.firmware };
    this.refetch.set(id, [2000, 8000, 20000].map((ms) => setTimeout(() => this.reloadBoard(id), ms)));
  }

  // stateAfterRestart reads the board's record again, debounced, while
  // soon's minute runs.
  stateAfterRestart(b) {
    if (!b.infoWatch) return;
    if (Date.now() > b.infoWatch.until || b.firmware !== b.infoWatch.fw) { b.infoWatch = null; return; }
    clearTimeout(b.infoTimer);
    b.infoTimer = setTimeout(() => this.reloadBoard(b.id), 400);
  }

  scheduleReload() {
    if (this.reloadTimer) return;
    this.reloadTimer = setTimeout(() => {
      this.reloadTimer = 0;
      this.loadBoards().catch(() => {});
    }, 500);
  }

  // connect starts the fleet's event stream.
  connect() {
    if (this.stream) return;
    this.stream = new EventStream(this.api, {
      contiguous: true,
      onEvent: (ev) => {
        this.apply(ev, false);
        // The number of the last event the page took in, on the root
        // element, for tools that watch the page (the browser tests wait
        // on it rather than for a fixed time).
        document.documentElement.dataset.lastEvent = String(ev.n);
      },
      onStatus: (st) => { this.status = st; this.emit('status', st); },
      onGap: (count, from, to) => {
        this.gaps += count;
        this.emit('gap', { count, from, to });
        this.scheduleReload();
      },
    }).start();
  }

  disconnect() {
    if (this.stream) this.stream.stop();
    this.stream = null;
  }

  // apply takes one event of the stream. Replayed events (a board page's
  // catch-up) never overwrite newer state and are not added to the
  // fleet's event list again.
  apply(ev, replay) {
    const t = Date.parse(ev.time) || Date.now();
    const b = this.boards.get(ev.board);
    if (!replay) {
      this.events.push(ev);
      if (this.events.length > EVENTS_KEPT * 1.25) this.events.splice(0, this.events.length - EVENTS_KEPT);
    }
    if (!b) {
      if (this.loaded && !replay) this.scheduleReload();
      if (!replay) this.emit('event', ev);
      return;
    }
    if (t > b.lastSeen && ev.type !== 'offline') b.lastSeen = t;
    switch (ev.type) {
      case 'online': {
        if (replay) break;
        b.online = true;
        b.offline_reason = '';
        const d = parseJSON(ev.data);
        if (d && Array.isArray(d.transports)) b.transports = d.transports;
        if (!replay) this.soon(b.id);
        break;
      }
      case 'offline':
        if (!replay) {
          b.online = false;
          b.offline_reason = ev.reason || '';
        }
        break;
      case 'restarted':
        b.restartedAt = t;
        if (!replay) {
          delete b.live.ota; // a restart ends any update session
          this.soon(b.id);
        }
        break;
      case 'state': {
        const cur = b.live[ev.kind];
        const data = parseJSON(ev.data);
        if (supersedes(ev.n, cur)) b.live[ev.kind] = { n: ev.n, t, data };
        if (replay) break;
        if (ev.kind === 'ota' && data && data.state === 'active') {
          this.soon(b.id); // an image was activated: the board restarts into it
        } else if (ev.kind === 'system' && cur && cur.data && data && data.uptime_s < cur.data.uptime_s) {
          delete b.live.ota; // uptime went back: the board restarted
          this.soon(b.id);
        } else {
          this.stateAfterRestart(b);
        }
        break;
      }
      case 'happening': {
        const hs = b.happenings;
        if (!hs.some((x) => x.n === ev.n)) {
          hs.push(ev);
          if (hs.length > 1 && hs[hs.length - 2].n > ev.n) hs.sort((x, y) => x.n - y.n);
          if (hs.length > HAPPENINGS_KEPT) hs.splice(0, hs.length - HAPPENINGS_KEPT);
        }
        break;
      }
    }
    b.ver++;
    this.emit('board', b.id);
    if (!replay) this.emit('event', ev);
  }

  // setLive records state read directly from a board (GET /leds ...).
  // asOf is the event number when the read was sent (store.lastN then):
  // the reply is numbered readAt(asOf), the stale-read rule above.
  setLive(id, kind, data, asOf) {
    const b = this.boards.get(id);
    if (!b) return;
    const cur = b.live[kind];
    const n = readAt(asOf === undefined ? this.lastN : asOf);
    if (supersedes(n, cur)) b.live[kind] = { n, t: Date.now(), data };
    b.ver++;
    this.emit('board', id);
  }

  groups() {
    const m = new Map();
    for (const b of this.boards.values()) for (const g of b.groups) {
      if (!m.has(g)) m.set(g, []);
      m.get(g).push(b);
    }
    return [...m.entries()].sort((a, b) => a[0] - b[0]);
  }

  label(b) { return b.hostname || b.id; }
}
