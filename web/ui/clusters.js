// ClusterPicker lists a fleet's clusters from GET /api/v1/clusters, each
// with its state and, when it is not synced, the reason; each is a link
// that switches the whole dashboard to that cluster (its prefix
// /clusters/{name}/), and "All clusters" opens the view across them. The
// location hash holds the choice (#/clusters/{name}/pods,
// #/clusters/*/pods), so a link opens the same cluster. Items are built
// once per set of clusters and updated in place, so polling never disturbs
// keyboard focus.
//
// union and renderSlots are what the page shows of several clusters at
// once: their resources added up, and each one's part of an answer.

import {h} from './dom.js';

// ALL is the hash's name for every cluster: never a cluster's name, which
// is a DNS label.
export const ALL = '*';

const STATES = {synced: 'synced', syncing: 'SYNCING', stale: 'STALE', failed: 'FAILED'};

export class ClusterPicker {
  constructor(section, list) {
    this.section = section;
    this.list = list;
    this.items = new Map(); // name → {a, count, state, reason}
    this.names = '';
  }

  // update renders clusters ([{name, state, reason, objects}]); current is
  // the name shown (or ALL); href(name) is the hash that opens one.
  update(clusters, current, href) {
    this.section.hidden = false;
    const all = {name: ALL, state: worst(clusters), objects: clusters.reduce((n, c) => n + (c.objects ?? 0), 0),
      reason: summary(clusters)};
    const rows = [all, ...clusters];
    const names = rows.map((c) => c.name).join(',');
    if (names !== this.names) this.build(rows);
    for (const c of rows) {
      const it = this.items.get(c.name);
      it.a.href = href(c.name);
      if (current === c.name) it.a.setAttribute('aria-current', 'page');
      else it.a.removeAttribute('aria-current');
      it.a.dataset.state = c.state;
      it.count.textContent = (c.objects ?? 0).toLocaleString('en-US');
      it.state.textContent = c.name === ALL ? '' : STATES[c.state] ?? c.state;
      it.state.className = `badge ${c.state === 'synced' ? 'badge-ok' : c.state === 'syncing' ? 'badge-warn' : 'badge-stale'}`;
      it.state.hidden = c.name === ALL;
      it.reason.textContent = c.reason ?? '';
      it.reason.hidden = !c.reason;
      it.a.title = c.reason ? `${c.name}: ${c.state}\n${c.reason}` : `${c.name === ALL ? 'all clusters' : c.name}: ${c.state}`;
    }
  }

  build(rows) {
    this.names = rows.map((c) => c.name).join(',');
    this.items.clear();
    this.list.replaceChildren(...rows.map((c) => {
      const count = h('span', {class: 'res-count'});
      const state = h('span', {class: 'badge'});
      const reason = h('span', {class: 'res-fresh cluster-reason'});
      const a = h('a', {class: 'res cluster', dataset: {cluster: c.name}},
        h('span', {class: 'res-line'}, h('span', {class: 'res-name'}, c.name === ALL ? 'All clusters' : c.name), count),
        h('span', {class: 'res-line'}, state),
        reason);
      this.items.set(c.name, {a, count, state, reason});
      return h('li', {}, a);
    }));
  }
}

// worst is the state of the fleet as a whole: its least healthy cluster's.
function worst(clusters) {
  const rank = ['synced', 'stale', 'syncing', 'failed'];
  return clusters.reduce((w, c) => (rank.indexOf(c.state) > rank.indexOf(w) ? c.state : w), 'synced');
}

// summary says how many clusters are not synced, for "All clusters".
function summary(clusters) {
  const off = clusters.filter((c) => c.state !== 'synced');
  if (off.length === 0) return '';
  return off.map((c) => `${c.name} ${STATES[c.state] ?? c.state}`).join(', ');
}

// union is the resources of several clusters as one list: counts added,
// synced and connected only where every cluster is, stale where any is.
export function union(lists) {
  const by = new Map();
  for (const list of lists) {
    for (const r of list ?? []) {
      const u = by.get(r.name);
      if (!u) {
        by.set(r.name, {...r});
        continue;
      }
      u.count += r.count;
      u.synced &&= r.synced;
      u.watchConnected &&= r.watchConnected;
      u.stale ||= r.stale;
      u.lastError ||= r.lastError;
    }
  }
  return [...by.values()];
}

// renderSlots shows in list how each cluster took part in an answer
// across clusters (its clusters member): a cluster not answering is named
// with why.
export function renderSlots(list, slots) {
  list.replaceChildren(...slots.map((s) => {
    const what = s.status === 200 ? `${s.state ?? 'synced'} · ${(s.total ?? 0).toLocaleString('en-US')}`
      : s.status === 403 ? 'not allowed to read'
        : s.status === 404 ? 'does not serve this resource'
          : `not serving${s.reason ? `: ${s.reason}` : ` (${s.status})`}`;
    return h('li', {title: s.reason ?? '', dataset: {cluster: s.cluster, status: String(s.status), state: s.state ?? '',
      total: String(s.total ?? ''), ok: String(s.status === 200)}}, `${s.cluster}: ${what}`);
  }));
  list.hidden = slots.length === 0;
}
