// Differences between two versions of an object, as a list of
// {path, before, after} (undefined: absent), for showing what changed.
//
// A MODIFIED event's merge patch (RFC 7386) says which subtrees changed; the
// walk goes down those only, and compares the two full versions there, so
// that a changed array (which a merge patch replaces whole) is reported
// element by element. Without a patch the whole objects are compared.

const MAX_CHANGES = 200;

export function changes(before, after, patch) {
  const out = [];
  if (isObject(patch)) walkPatch(patch, [], before, after, out);
  else compare(before, after, [], out);
  // Every change moves the resourceVersion; the change's heading shows it.
  return out.filter((c) => c.path !== 'metadata.resourceVersion').slice(0, MAX_CHANGES);
}

function walkPatch(patch, path, before, after, out) {
  for (const k of Object.keys(patch).sort()) {
    const sub = [...path, k];
    const a = get(before, sub);
    if (isObject(patch[k]) && isObject(a)) walkPatch(patch[k], sub, before, after, out);
    else compare(a, get(after, sub), sub, out);
  }
}

function compare(a, b, path, out) {
  if (out.length >= MAX_CHANGES || equal(a, b)) return;
  if (isObject(a) && isObject(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    for (const k of keys) compare(a[k], b[k], [...path, k], out);
  } else if (Array.isArray(a) && Array.isArray(b)) {
    compareArrays(a, b, path, out);
  } else {
    out.push({path: formatPath(path), before: a, after: b});
  }
}

// compareArrays matches elements by a naming field when every element has
// one (containers by name, conditions by type), else by position.
function compareArrays(a, b, path, out) {
  const key = ['name', 'type', 'ip'].find((k) =>
    [...a, ...b].every((e) => isObject(e) && typeof e[k] === 'string') &&
    new Set(a.map((e) => e[k])).size === a.length && new Set(b.map((e) => e[k])).size === b.length);
  if (!key) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) compare(a[i], b[i], [...path, i], out);
    return;
  }
  const byKey = (arr) => new Map(arr.map((e) => [e[key], e]));
  const ma = byKey(a);
  const mb = byKey(b);
  for (const k of new Set([...ma.keys(), ...mb.keys()])) {
    compare(ma.get(k), mb.get(k), [...path, {key, value: k}], out);
  }
}

function get(obj, path) {
  let v = obj;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[seg];
  }
  return v;
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function equal(a, b) {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
}

const plainKey = /^[A-Za-z_$][\w$-]*$/;

// formatPath writes a path the way jq or kubectl's JSONPath would read it:
// status.conditions[type=Ready].status, metadata.labels["app.kubernetes.io/name"].
function formatPath(path) {
  let s = '';
  for (const seg of path) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (typeof seg === 'object') s += `[${seg.key}=${seg.value}]`;
    else if (plainKey.test(seg)) s += s ? `.${seg}` : seg;
    else s += `[${JSON.stringify(seg)}]`;
  }
  return s || '(object)';
}

// preview is a one-line rendering of a value, cut to a readable length.
export function preview(v, max = 160) {
  if (v === undefined) return '(absent)';
  const s = JSON.stringify(v);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}
