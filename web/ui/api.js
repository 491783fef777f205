// REST helpers for kubeindex's API. Errors are Kubernetes Status objects;
// APIError carries their message and HTTP code.
//
// When the server requires a bearer token, the dashboard asks for one and
// keeps it in this tab's sessionStorage (gone when the tab closes); it is
// sent only to this origin: in the Authorization header, and on the
// WebSocket as a Sec-WebSocket-Protocol entry, as kube-apiserver accepts it.

const TOKEN_KEY = 'kubeindex.token';

export const credentials = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY) ?? '';
  },
  set token(t) {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
};

// wsProtocols are the subprotocols to offer on the stream: none without a
// token; with one, the server's "kubeindex" (which it then selects) and the
// token entry.
export function wsProtocols(token = credentials.token) {
  if (!token) return [];
  const bytes = new TextEncoder().encode(token);
  const b64 = btoa(String.fromCharCode(...bytes)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
  return ['kubeindex', `base64url.bearer.authorization.k8s.io.${b64}`];
}

export class APIError extends Error {
  constructor(code, status) {
    super(status?.message || `HTTP ${code}`);
    this.code = code;
    this.reason = status?.reason || '';
  }
}

// getJSON fetches a path and returns its decoded body, or throws an
// APIError (HTTP error) or a TypeError (kubeindex unreachable).
export async function getJSON(path, {signal} = {}) {
  const headers = {Accept: 'application/json'};
  if (credentials.token) headers.Authorization = `Bearer ${credentials.token}`;
  const res = await fetch(path, {headers, cache: 'no-store', signal});
  let body = null;
  try {
    body = await res.json();
  } catch {
    // A body that is not JSON: the status code alone explains the error.
  }
  if (!res.ok) throw new APIError(res.status, body);
  return body;
}

// query encodes params; an array value is a repeated parameter.
function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    for (const x of Array.isArray(v) ? v : [v]) if (x !== undefined && x !== '') q.append(k, x);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

// place is where the dashboard's cluster answers: '' (the root: a single
// cluster, or a fleet's lists and counts across its clusters) or
// /clusters/{name} (one cluster of a fleet). app.js sets it when the view
// changes cluster; every api call reads it when it is made.
export const place = {base: ''};

// clusterBase is the path prefix of one cluster of a fleet.
export function clusterBase(name) {
  return `/clusters/${encodeURIComponent(name)}`;
}

function routes(base) {
  return {
    resources: (opts) => getJSON(`${base()}/api/v1/resources`, opts),
    lookupIP: (ip, params, opts) => getJSON(`${base()}/api/v1/ip/${encodeURIComponent(ip)}${query(params)}`, opts),
    indexValues: (resource, index, limit, opts) =>
      getJSON(`${base()}/api/v1/resources/${encodeURIComponent(resource)}/indexes/${encodeURIComponent(index)}${query({limit})}`, opts),
    list: (resource, params, opts) => getJSON(`${base()}/api/v1/${encodeURIComponent(resource)}${query(params)}`, opts),
    get: (resource, key, opts) => getJSON(`${base()}/api/v1/${encodeURIComponent(resource)}/${key.split('/').map(encodeURIComponent).join('/')}`, opts),
    counts: (resource, params, opts) => getJSON(`${base()}/api/v1/resources/${encodeURIComponent(resource)}/counts${query(params)}`, opts),
    search: (params, opts) => getJSON(`${base()}/api/v1/search${query(params)}`, opts),
  };
}

// api asks the cluster the dashboard shows (place.base).
export const api = routes(() => place.base);

// inCluster asks one named cluster of a fleet, whatever the view shows.
export function inCluster(name) {
  return routes(() => clusterBase(name));
}

// fleet asks a fleet's own routes, at the root (docs/clusters.md); its
// list and counts are api.list and api.counts with place.base ''.
export const fleet = {
  clusters: (opts) => getJSON('/api/v1/clusters', opts),
  lookupIP: (ip, params, opts) => getJSON(`/api/v1/clusters/ip/${encodeURIComponent(ip)}${query(params)}`, opts),
};
