// IPLookup answers "who has this IP" from GET /api/v1/ip/{ip}, saying what
// kind of match it is: one pod, a node address shared by hostNetwork pods,
// only finished pods, or several pods at once.

import {h} from './dom.js';
import {api} from './api.js';

const MATCH = {
  pod: (n) => (n > 1
    ? `Owned by one running pod. ${n - 1} finished pod${n > 2 ? 's' : ''} used it before.`
    : 'Owned by one pod.'),
  hostNetwork: (n) => `A node's address, shared by ${n} hostNetwork pod${n === 1 ? '' : 's'}; none of them owns it.`,
  completed: () => 'Only finished pods had this address: it is free, or about to be reused.',
  ambiguous: (n) => `${n} pods that are not hostNetwork claim this address at once. That is worth investigating.`,
};

export class IPLookup {
  constructor(form, input, result, {onOpenPod}) {
    this.input = input;
    this.result = result;
    this.onOpenPod = onOpenPod;
    this.abort = null;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.lookup(input.value.trim());
    });
  }

  get isOpen() {
    return !this.result.hidden;
  }

  close() {
    this.abort?.abort();
    this.result.hidden = true;
    this.result.replaceChildren();
  }

  async lookup(ip) {
    if (!ip) return;
    this.abort?.abort();
    this.abort = new AbortController();
    this.show(ip, [h('p', {class: 'muted'}, 'Looking up…')], 'loading');
    try {
      const res = await api.lookupIP(ip, {signal: this.abort.signal});
      this.render(res);
    } catch (err) {
      if (err.name === 'AbortError') return;
      const msg = err.code === 404 ? `No pod has ${ip}.`
        : err.code === 503 ? 'Pods are not synced yet; try again in a moment.'
          : err.code ? err.message : `kubeindex did not answer: ${err.message}`;
      this.show(ip, [h('p', {class: err.code === 404 ? 'ip-summary' : 'ip-summary error'}, msg)], err.code === 404 ? 'none' : 'error');
    }
  }

  show(ip, content, match) {
    this.result.dataset.match = match;
    this.result.hidden = false;
    this.result.replaceChildren(
      h('div', {class: 'ip-head'},
        h('h2', {id: 'ip-title'}, 'Who has ', h('span', {class: 'mono'}, ip), '?'),
        h('button', {type: 'button', class: 'icon-btn', 'aria-label': 'Close IP lookup result', onclick: () => {
          this.close();
          this.input.focus();
        }}, '×')),
      ...content);
  }

  render(res) {
    const pods = res.pods ?? [];
    const items = new Map((res.items ?? []).map((o) => [`${o.metadata.namespace}/${o.metadata.name}`, o]));
    const explain = MATCH[res.match]?.(pods.length) ?? '';
    const rows = pods.map((p) => {
      const key = `${p.namespace}/${p.name}`;
      return h('tr', {dataset: {hostNetwork: String(p.hostNetwork), active: String(p.active), key}},
        h('td', {}, h('button', {type: 'button', class: 'link mono', onclick: (e) => this.onOpenPod(key, items.get(key), res, e.currentTarget)}, key)),
        h('td', {}, p.phase),
        h('td', {}, p.nodeName || '—'),
        h('td', {}, p.hostNetwork ? h('span', {class: 'badge badge-host'}, 'hostNetwork') : 'pod network'),
        h('td', {}, p.active ? 'active' : h('span', {class: 'muted'}, 'finished')));
    });
    this.show(res.ip, [
      h('p', {class: 'ip-summary'},
        h('span', {class: `badge match match-${res.match}`}, res.match), ' ', explain,
        h('span', {class: 'muted'}, ` As of resourceVersion ${res.metadata?.resourceVersion ?? '?'}.`)),
      h('table', {class: 'ip-table', 'aria-labelledby': 'ip-title'},
        h('thead', {}, h('tr', {}, ['Pod', 'Phase', 'Node', 'Network', 'State'].map((t) => h('th', {scope: 'col'}, t)))),
        h('tbody', {}, rows)),
    ], res.match);
  }
}
