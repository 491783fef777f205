// ResourceNav lists the cached resources with their counts, sync state and
// freshness, from /api/v1/resources. Items are built once per set of
// resources and updated in place, so polling never disturbs keyboard focus.

import {h, ago} from './dom.js';

export class ResourceNav {
  // href(name) is the hash that opens a resource.
  constructor(list, href = (name) => `#/${encodeURIComponent(name)}`) {
    this.list = list;
    this.href = href;
    this.items = new Map(); // name → {a, count, badges, fresh}
    this.names = '';
  }

  // update renders the resources; current is the name shown in the main view.
  update(resources, current, now = Date.now()) {
    const names = resources.map((r) => r.name).join(',');
    if (names !== this.names) this.build(resources);
    for (const r of resources) {
      const it = this.items.get(r.name);
      it.a.href = this.href(r.name);
      if (current === r.name) it.a.setAttribute('aria-current', 'page');
      else it.a.removeAttribute('aria-current');
      it.count.textContent = r.count.toLocaleString('en-US');
      it.count.dataset.count = String(r.count);
      it.a.dataset.stale = String(!!r.stale);
      it.a.dataset.synced = String(!!r.synced);
      it.a.dataset.watch = r.watchConnected ? 'connected' : 'disconnected';
      it.badges.replaceChildren(...badges(r));
      it.fresh.textContent = freshness(r, now);
      it.a.title = tooltip(r);
    }
  }

  build(resources) {
    this.names = resources.map((r) => r.name).join(',');
    this.items.clear();
    this.list.replaceChildren(...resources.map((r) => {
      const count = h('span', {class: 'res-count'});
      const badges = h('span', {class: 'res-badges'});
      const fresh = h('span', {class: 'res-fresh'});
      const gv = r.group ? `${r.group}/${r.version}` : r.version;
      const a = h('a', {class: 'res', dataset: {resource: r.name}},
        h('span', {class: 'res-line'}, h('span', {class: 'res-name'}, r.name), count),
        h('span', {class: 'res-line'}, h('span', {class: 'res-kind'}, `${r.kind} · ${gv}`), badges),
        fresh);
      this.items.set(r.name, {a, count, badges, fresh});
      return h('li', {}, a);
    }));
  }
}

// badges says, most serious first, what is wrong with a resource's cache.
function badges(r) {
  const out = [];
  if (r.stale) out.push(h('span', {class: 'badge badge-stale'}, 'STALE'));
  if (!r.synced) out.push(h('span', {class: 'badge badge-warn'}, 'SYNCING'));
  else if (!r.watchConnected && !r.stale) out.push(h('span', {class: 'badge badge-warn'}, 'WATCH DOWN'));
  return out;
}

function freshness(r, now) {
  if (!r.synced) return 'waiting for the initial list';
  if (!r.watchConnected) return `watch down ${ago(r.disconnectedSince, now).replace(' ago', '')}`;
  return `last event ${ago(r.lastEvent, now)}`;
}

function tooltip(r) {
  const parts = [`${r.count} objects`, `resourceVersion ${r.resourceVersion || '—'}`,
    r.synced ? 'synced' : 'not synced yet', r.watchConnected ? 'watch connected' : 'watch disconnected'];
  if (r.stale) parts.push('STALE: answers may be out of date');
  if (r.lastError) parts.push(`last error: ${r.lastError}`);
  return parts.join('\n');
}
