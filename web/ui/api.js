// REST helpers for kubeindex's API. Errors are Kubernetes Status objects;
// APIError carries their message and HTTP code.

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
  const res = await fetch(path, {headers: {Accept: 'application/json'}, cache: 'no-store', signal});
  let body = null;
  try {
    body = await res.json();
  } catch {
    // A body that is not JSON: the status code alone explains the error.
  }
  if (!res.ok) throw new APIError(res.status, body);
  return body;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const api = {
  resources: (opts) => getJSON('/api/v1/resources', opts),
  lookupIP: (ip, opts) => getJSON(`/api/v1/ip/${encodeURIComponent(ip)}`, opts),
  indexValues: (resource, index, limit, opts) =>
    getJSON(`/api/v1/resources/${encodeURIComponent(resource)}/indexes/${encodeURIComponent(index)}${query({limit})}`, opts),
  list: (resource, params, opts) => getJSON(`/api/v1/${encodeURIComponent(resource)}${query(params)}`, opts),
};
