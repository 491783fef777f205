// Small DOM helpers. Text from the cluster is only ever set as text (never
// parsed as HTML), so object data cannot inject markup.

// h builds an element: h('button', {class: 'x', onclick: fn}, 'text', child).
// Attributes that are null, undefined or false are left out; true sets an
// empty attribute.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// duration formats milliseconds the way kubectl prints ages: 42s, 5m, 3h, 12d.
export function duration(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 120) return `${m}m`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs}h`;
  return `${Math.floor(hrs / 24)}d`;
}

// ago says how long ago a time was, for freshness: "4s ago", "never".
export function ago(time, now = Date.now()) {
  if (!time) return 'never';
  const t = typeof time === 'number' ? time : Date.parse(time);
  if (Number.isNaN(t)) return 'unknown';
  return now - t < 1500 ? 'just now' : `${duration(now - t)} ago`;
}

// clock formats a time as a local HH:MM:SS.
export function clock(time) {
  const d = new Date(time);
  return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString([], {hour12: false});
}

// plural gives "1 pod", "3 pods" from a count and a resource's names.
export function counted(n, singular, pluralName) {
  return `${n.toLocaleString('en-US')} ${n === 1 ? singular : pluralName}`;
}

// objectKey is the key an object is known by: namespace/name, or name.
export function objectKey(obj) {
  const m = obj?.metadata ?? {};
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}

// typing reports whether keyboard input goes to a text field, where
// single-key shortcuts must not fire.
export function typing(target) {
  return target instanceof HTMLElement &&
    (target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName));
}
