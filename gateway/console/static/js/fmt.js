// Formatting of times, sizes and versions for display.

export function ago(t, now = Date.now()) {
  if (!t) return '—';
  const ms = now - t;
  if (ms < 5000) return 'now';
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + ' s ago';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min ago';
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + ' h ago';
  return Math.floor(hr / 24) + ' d ago';
}

export function clock(t) {
  if (!t) return '';
  const d = new Date(t);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

export function dateTime(t) {
  if (!t) return '—';
  const d = new Date(t);
  if (isNaN(d)) return '—';
  return d.toISOString().replace('T', ' ').slice(0, 19) + 'Z';
}

export function bytes(n) {
  n = Number(n) || 0;
  if (n < 1024) return n + ' B';
  if (n < 1 << 20) return (n / 1024).toFixed(1) + ' KiB';
  if (n < 1 << 30) return (n / (1 << 20)).toFixed(1) + ' MiB';
  return (n / (1 << 30)).toFixed(2) + ' GiB';
}

export function shortSha(s) { return s ? String(s).slice(0, 12) : ''; }

// parseVersion reads "1.2.3" with an optional "-pre" or "+build"; null
// when s is not such a version.
export function parseVersion(s) {
  const m = /^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(String(s || '').trim());
  if (!m) return null;
  return { n: [Number(m[1]), Number(m[2]), Number(m[3])], pre: m[4] || '' };
}

// cmpVersion compares two versions: -1, 0, 1, or null when either is
// not a version. A pre-release sorts before its release.
export function cmpVersion(a, b) {
  const x = parseVersion(a), y = parseVersion(b);
  if (!x || !y) return null;
  for (let i = 0; i < 3; i++) if (x.n[i] !== y.n[i]) return x.n[i] < y.n[i] ? -1 : 1;
  if (x.pre === y.pre) return 0;
  if (!x.pre) return 1;
  if (!y.pre) return -1;
  return x.pre < y.pre ? -1 : 1;
}

// updateAvailable says whether a board running fw should take the
// channel's version: it is newer, or (when either is not a version) it is
// simply different.
export function updateAvailable(fw, channelVersion) {
  if (!channelVersion || !fw || fw === channelVersion) return false;
  const c = cmpVersion(channelVersion, fw);
  return c === null ? true : c > 0;
}

export function parseJSON(s) {
  if (typeof s !== 'string' || s === '') return s === '' ? null : s;
  try { return JSON.parse(s); } catch { return s; }
}

// oneLine shows a value (an event's data) on one line, cut to max.
export function oneLine(v, max = 240) {
  let s = typeof v === 'string' ? v : JSON.stringify(v);
  if (s === undefined) s = '';
  return s.length > max ? s.slice(0, max - 1) + '…' : s;
}

export function plural(n, one, many) { return n + ' ' + (n === 1 ? one : (many || one + 's')); }
