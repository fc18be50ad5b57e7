// The console's client of the fleet API: REST calls, the upload, and the
// line streams (rollout watches). The bearer token lives in
// sessionStorage only: it ends with the tab and is never written to
// localStorage or a cookie.

const TOKEN_KEY = 'holo.console.token';

// ApiError is a refused or failed call: status (0 when the gateway was not
// reached), the error code ({"error"} of the reply: the gateway's, or the
// board's own when a board refused) and its message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || code);
    this.status = status;
    this.code = code;
  }
  get text() { return this.code + (this.message && this.message !== this.code ? ': ' + this.message : ''); }
}

function errorOf(status, data, text) {
  if (data && typeof data === 'object' && (data.error || data.message)) {
    return new ApiError(status, String(data.error || 'http_' + status), String(data.message || ''));
  }
  return new ApiError(status, 'http_' + status, String(text || '').slice(0, 300));
}

export class Api {
  constructor() {
    this.token = sessionStorage.getItem(TOKEN_KEY) || '';
  }

  setToken(t) {
    this.token = t || '';
    if (this.token) sessionStorage.setItem(TOKEN_KEY, this.token);
    else sessionStorage.removeItem(TOKEN_KEY);
  }

  headers(extra) {
    const hd = Object.assign({}, extra || {});
    if (this.token) hd.Authorization = 'Bearer ' + this.token;
    return hd;
  }

  // req runs one REST call and returns the reply's JSON (null for none);
  // it throws ApiError when the gateway (or a board) refused.
  async req(method, path, body, opts) {
    const init = { method, headers: this.headers(body !== undefined ? { 'Content-Type': 'application/json' } : null), cache: 'no-store' };
    if (body !== undefined) init.body = JSON.stringify(body);
    if (opts && opts.signal) init.signal = opts.signal;
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'unreachable', 'the gateway did not answer (' + e.message + ')');
    }
    const text = await res.text();
    let data = null;
    if (text) { try { data = JSON.parse(text); } catch { data = null; } }
    if (!res.ok) {
      const err = errorOf(res.status, data, text);
      if (res.status === 401 && this.onUnauthorized) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }

  get(path, opts) { return this.req('GET', path, undefined, opts); }
  post(path, body) { return this.req('POST', path, body === undefined ? {} : body); }
  put(path, body) { return this.req('PUT', path, body); }
  patch(path, body) { return this.req('PATCH', path, body); }
  del(path) { return this.req('DELETE', path); }

  // call runs one request of the board API on a board and returns its
  // reply body parsed; a board's refusal throws ApiError with the board's
  // own code and message.
  async call(id, method, path, body) {
    const req = { method, path };
    if (body !== undefined) req.body = body;
    const r = await this.post('/v1/boards/' + encodeURIComponent(id) + '/call', req);
    let parsed = null;
    if (r && r.body) { try { parsed = JSON.parse(r.body); } catch { parsed = r.body; } }
    return parsed;
  }

  // upload sends a firmware image (a File) as POST /v1/artifacts with
  // progress reports (fetch cannot report upload progress; XHR can).
  upload(file, onProgress) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', '/v1/artifacts?name=' + encodeURIComponent(file.name));
      if (this.token) xhr.setRequestHeader('Authorization', 'Bearer ' + this.token);
      xhr.setRequestHeader('Content-Type', 'application/octet-stream');
      xhr.upload.onprogress = (e) => { if (e.lengthComputable && onProgress) onProgress(e.loaded, e.total); };
      xhr.onload = () => {
        let data = null;
        try { data = JSON.parse(xhr.responseText); } catch { data = null; }
        if (xhr.status >= 200 && xhr.status < 300) resolve(data);
        else reject(errorOf(xhr.status, data, xhr.responseText));
      };
      xhr.onerror = () => reject(new ApiError(0, 'unreachable', 'the upload was cut off'));
      xhr.send(file);
    });
  }

  // lines streams a newline-delimited JSON reply (grpc-gateway's form of a
  // server stream: {"result": ...} per line) to onItem until the stream
  // ends or signal aborts. It throws ApiError on a refusal or a
  // stream error line.
  async lines(path, signal, onItem) {
    let res;
    try {
      res = await fetch(path, { headers: this.headers({ Accept: 'application/json' }), cache: 'no-store', signal });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, 'unreachable', e.message);
    }
    if (!res.ok) {
      const text = await res.text();
      let data = null;
      try { data = JSON.parse(text); } catch { data = null; }
      throw errorOf(res.status, data, text);
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).trim();
        buf = buf.slice(i + 1);
        if (!line) continue;
        const obj = JSON.parse(line);
        if (obj.error) throw errorOf(obj.error.code === 8 ? 429 : 500, { error: 'stream', message: obj.error.message }, '');
        if (obj.result) onItem(obj.result);
      }
    }
  }
}

// enc encodes one path segment.
export const enc = encodeURIComponent;
