// DOM helpers. Everything the console shows is built with h(): strings
// become text nodes, attributes are set one by one, and there is no way to
// hand it HTML. Text from boards (names, labels, event data, errors) can
// therefore never become markup.

const PROPS = new Set(['value', 'checked', 'disabled', 'selected', 'hidden', 'indeterminate', 'open', 'multiple', 'required', 'readOnly', 'tabIndex']);

// h(tag, props, ...children) returns a new element. props: class, text,
// on: {event: fn}, dataset: {}, style: {prop: value}, attributes by name
// (never on* handlers), and the DOM properties in PROPS.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style') for (const [p, val] of Object.entries(v)) el.style.setProperty(p, val);
      else if (/^on/i.test(k)) throw new Error('h: event handlers go in props.on, not ' + k);
      else if (PROPS.has(k)) el[k] = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

// append adds children (elements, strings as text, arrays, nothing for
// null/false) to el.
export function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

// clear removes every child of el.
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// setText sets el's text when it changed (no DOM write otherwise).
export function setText(el, s) {
  s = s === null || s === undefined ? '' : String(s);
  if (el.textContent !== s) el.textContent = s;
}

// toggleClass sets or clears one class when it changed.
export function toggleClass(el, name, on) {
  if (el.classList.contains(name) !== !!on) el.classList.toggle(name, !!on);
}

// field wraps a control with its label.
export function field(label, control, hint) {
  const id = control.id || ('f' + Math.random().toString(36).slice(2, 9));
  control.id = id;
  return h('div', { class: 'field' }, h('label', { for: id, text: label }), control,
    hint ? h('span', { class: 'hint', text: hint }) : null);
}

// select builds a <select> from [value, label] pairs.
export function select(options, value, props) {
  const s = h('select', props || null);
  for (const o of options) {
    const [v, l] = Array.isArray(o) ? o : [o, o];
    s.appendChild(h('option', { value: String(v), text: l, selected: String(v) === String(value) }));
  }
  return s;
}

// button builds a <button type="button">.
export function button(text, onClick, props) {
  return h('button', Object.assign({ type: 'button', text, on: { click: onClick } }, props || {}));
}

// debounceFrame runs fn at most once per animation frame.
export function debounceFrame(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; fn(); });
  };
}
