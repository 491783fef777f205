// IPLookup answers "who has this IP" from GET /api/v1/ip/{ip}: every
// owner of any kind (pods, Services, nodes) with the role of the address,
// narrowed by a port when one is given, now or at a moment from the
// ownership history, saying what kind of match it is and how certain.
// Across a fleet's clusters (across set) it asks the fleet's
// GET /api/v1/clusters/ip/{ip} and shows each cluster holding the address,
// named, with its own answer.

import {h} from './dom.js';
import {APIError, api, fleet} from './api.js';

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

const MATCH = {
  pod: (r) => (r.pods > 1
    ? `Owned by one running pod. ${plural(r.pods - 1, 'finished pod', 'finished pods')} used it before.`
    : 'Owned by one pod.'),
  service: () => 'A Service\'s address; no pod has it.',
  node: () => 'A node\'s address; no running pod uses it.',
  hostNetwork: (r) => `A node's address, shared by ${plural(r.pods, 'hostNetwork pod', 'hostNetwork pods')}; none of them owns it.`,
  completed: () => 'Only finished pods had this address: it is free, or about to be reused.',
  ambiguous: () => 'Several pods or Services claim this address at once. That is worth investigating.',
};

const CERTAINTY = {
  exact: 'Inside the observed ownership, away from any change of owner.',
  boundary: 'Within the history skew of a change of owner: both sides are shown, earliest first.',
};

// portNote says what a port query did to the answer.
function portNote(res) {
  const p = res.port;
  if (!p) return null;
  const port = `${p.number}/${p.protocol}`;
  if (res.via === 'port') return `Port ${port} picked the one holder that declares it.`;
  if (!p.declared) return `No holder sharing the address declares port ${port}: the answer is not narrowed, nothing is guessed.`;
  return `Port ${port} did not narrow the answer.`;
}

// parseAt turns what was typed in the "at" field into the API's at: empty
// is now; Unix seconds and RFC 3339 (with a zone) go as typed; a date and
// time without a zone is this browser's local time, sent in UTC. Anything
// else goes as typed too, for the server to refuse with its reason.
export function parseAt(text) {
  const s = text.trim();
  if (!s) return '';
  const m = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?$/.exec(s);
  if (!m) return s;
  const [, y, mo, d, hh, mi, ss = '0', frac = ''] = m;
  const t = new Date(+y, +mo - 1, +d, +hh, +mi, +ss);
  if (Number.isNaN(t.getTime())) return s;
  return t.toISOString().replace(/\.000Z$/, `${frac}Z`); // the fraction, every digit of it, kept as typed
}

// when formats an RFC 3339 time as UTC and as this browser's local time.
function when(time) {
  const d = new Date(time);
  if (Number.isNaN(d.getTime())) return time;
  return `${time} (${d.toLocaleString([], {hour12: false})} local)`;
}

export class IPLookup {
  constructor(form, input, result, {onOpen}) {
    this.across = false; // set by the app: the view is across a fleet's clusters
    this.input = input;
    this.port = form.elements.port;
    this.protocol = form.elements.protocol;
    this.at = form.elements.at;
    this.result = result;
    this.onOpen = onOpen;
    this.abort = null;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.lookup(input.value.trim(), {port: this.port.value.trim(), protocol: this.protocol.value, at: this.at.value});
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

  async lookup(ip, {port = '', protocol = '', at = ''} = {}) {
    if (!ip) return;
    const q = {port, protocol: port ? protocol : '', at: parseAt(at)};
    this.abort?.abort();
    this.abort = new AbortController();
    this.asked = ip;
    this.show(ip, q, [h('p', {class: 'muted'}, 'Looking up…')], 'loading');
    try {
      if (this.across) {
        this.renderAcross(await fleet.lookupIP(ip, q, {signal: this.abort.signal}), q);
        return;
      }
      const res = await api.lookupIP(ip, q, {signal: this.abort.signal});
      if (res.kind === 'IPHistoryLookup') this.renderHistory(res, q);
      else this.renderNow(res, q);
    } catch (err) {
      if (err.name === 'AbortError') return;
      this.renderError(ip, q, err);
    }
  }

  renderError(ip, q, err) {
    const moment = q.at ? ` at ${q.at}` : '';
    let match = 'error';
    let msg;
    if (err.code === 404) {
      match = 'none';
      msg = `Nobody has ${ip}${moment}: no pod, Service or node holds it.`;
    } else if (err.code === 410) {
      match = 'beforeHistory';
      msg = `Too far back for the history: ${err.message}`;
    } else if (err.code === 400) {
      msg = `Bad input: ${err.message}`;
    } else if (err.code === 503) {
      msg = 'Not synced yet; try again in a moment.';
    } else {
      msg = err.code ? err.message : `kubeindex did not answer: ${err.message}`;
    }
    const p = h('p', {class: match === 'none' ? 'ip-summary' : 'ip-summary error', role: match === 'none' ? null : 'alert'}, msg);
    this.show(ip, q, [p], match, {code: String(err.code ?? '')});
  }

  show(ip, q, content, match, data = {}) {
    this.result.replaceChildren();
    for (const k of Object.keys(this.result.dataset)) delete this.result.dataset[k];
    // query is what was asked, as sent: which lookup the result answers.
    const sent = new URLSearchParams(Object.entries(q).filter(([, v]) => v).sort()).toString(); // keys sorted, as Go sorts them
    Object.assign(this.result.dataset, {match, query: sent ? `${this.asked}?${sent}` : this.asked, ...data});
    this.result.hidden = false;
    const asked = [q.port && `port ${q.port}/${q.protocol || 'TCP'}`, q.at && `at ${q.at}`].filter(Boolean).join(', ');
    this.result.append(
      h('div', {class: 'ip-head'},
        h('h2', {id: 'ip-title'}, 'Who has ', h('span', {class: 'mono'}, ip), '?',
          asked ? h('span', {class: 'ip-asked muted'}, ` ${asked}`) : null),
        h('button', {type: 'button', class: 'icon-btn', 'aria-label': 'Close IP lookup result', onclick: () => {
          this.close();
          this.input.focus();
        }}, '×')),
      ...content.filter((c) => c !== null && c !== undefined && c !== false)); // append writes null as text
  }

  // renderNow shows who holds the address now: pods, then Services, then
  // nodes, as the API lists them; each opens its object.
  renderNow(res, q) {
    this.show(res.ip, q, this.nowContent(res), res.match, {via: res.via ?? ''});
  }

  // nowContent is an answer of now; cluster names the fleet's cluster it
  // came from ('' for the cluster shown).
  nowContent(res, cluster = '') {
    const pods = res.pods ?? [];
    const items = res.items ?? [];
    const rows = [];
    let i = 0;
    for (const p of pods) {
      const key = `${p.namespace}/${p.name}`;
      const obj = items[i++];
      rows.push(this.row('Pod', key, 'podIP', p.uid, {hostNetwork: String(p.hostNetwork), active: String(p.active)},
        this.openButton('pods', key, obj, res, cluster),
        [p.phase || 'no phase yet', p.nodeName ? ` on ${p.nodeName}` : '', ' ',
          p.hostNetwork ? h('span', {class: 'badge badge-host'}, 'hostNetwork') : 'pod network', ' ',
          p.active ? '' : h('span', {class: 'muted'}, 'finished')]));
    }
    for (const sv of res.services ?? []) {
      const key = `${sv.namespace}/${sv.name}`;
      rows.push(this.row('Service', key, sv.role, sv.uid, {}, this.openButton('services', key, items[i++], res, cluster), ''));
    }
    for (const n of res.nodes ?? []) {
      rows.push(this.row('Node', n.name, n.role, n.uid, {}, this.openButton('nodes', n.name, items[i++], res, cluster), ''));
    }
    const explain = MATCH[res.match]?.({pods: pods.length}) ?? '';
    return [
      h('p', {class: 'ip-summary'},
        h('span', {class: `badge match match-${res.match}`}, res.match),
        res.via ? [' ', h('span', {class: 'badge match-via'}, `via ${res.via}`)] : null,
        ' ', explain,
        h('span', {class: 'muted'}, ` As of resourceVersion ${res.metadata?.resourceVersion ?? '?'}.`)),
      portNote(res) && h('p', {class: 'ip-note', dataset: {declared: String(res.port.declared)}}, portNote(res)),
      this.table(['Kind', 'Owner', 'Role', 'State', 'UID'], rows),
    ];
  }

  // renderHistory shows who held the address at a moment: the intervals
  // of the owners, the certainty, and how far back the history reaches.
  renderHistory(res, q) {
    this.show(res.ip, q, this.historyContent(res), res.match, {certainty: res.certainty, at: res.at, via: res.via ?? ''});
  }

  historyContent(res) {
    const owners = res.owners ?? [];
    const rows = owners.map((o, n) => {
      const key = o.namespace ? `${o.namespace}/${o.name}` : o.name;
      const held = [when(o.from), o.since ? h('span', {class: 'muted'}, ` (its ${o.since}: present when the history began)`) : '',
        ' → ', o.to ? when(o.to) : h('span', {class: 'muted'}, 'still holds it')];
      return this.row(o.kind, key, o.role, o.uid, {order: String(n + 1), hostNetwork: String(!!o.hostNetwork)},
        h('span', {class: 'mono'}, key), [o.hostNetwork ? [h('span', {class: 'badge badge-host'}, 'hostNetwork'), ' '] : '', held]);
    });
    return [
      h('p', {class: 'ip-summary'},
        h('span', {class: `badge certainty certainty-${res.certainty}`}, res.certainty), ' ',
        h('span', {class: `badge match match-${res.match}`}, res.match),
        res.via ? [' ', h('span', {class: 'badge match-via'}, `via ${res.via}`)] : null,
        ' ', CERTAINTY[res.certainty] ?? '', ' ', MATCH[res.match]?.({pods: owners.filter((o) => o.kind === 'Pod').length}) ?? ''),
      h('p', {class: 'ip-note muted'}, `At ${when(res.at)}. The history reaches back to ${when(res.historySince)}.`),
      portNote(res) && h('p', {class: 'ip-note', dataset: {declared: String(res.port.declared)}}, portNote(res)),
      this.table(['Kind', 'Owner', 'Role', 'Held', 'UID'], rows),
    ];
  }

  // renderAcross shows a fleet's answer (GET /api/v1/clusters/ip/{ip}):
  // first in how many clusters the address is held, and that it is held
  // in more than one when it is (overlapping address blocks: none is
  // picked); then each cluster holding it, named, with its own answer as
  // a single cluster's box shows it; then, in a line, where nobody holds
  // it, and each cluster that did not answer and why.
  renderAcross(res, q) {
    const held = res.heldIn ?? [];
    const slots = res.clusters ?? [];
    const first = slots[0];
    if (held.length === 0 && first && first.status !== 404 && slots.every((sl) => sl.status === first.status)) {
      this.renderError(res.ip, q, new APIError(first.status, first.answer)); // every cluster refused it alike: bad input, too far back
      return;
    }
    const answered = slots.filter((sl) => sl.status === 200 || sl.status === 404).length;
    const moment = q.at ? ` at ${q.at}` : '';
    let summary;
    if (held.length === 0) {
      summary = `Nobody has ${res.ip}${moment} in ${answered === slots.length ? 'any cluster' : `the ${answered} of ${slots.length} clusters that answered`}.`;
    } else if (held.length === 1) {
      summary = `Held${moment} in one cluster: ${held[0]}.`;
    } else {
      summary = `Held${moment} in ${held.length} clusters: ${held.join(', ')}. Their address blocks overlap: each holder is shown, none is picked.`;
    }
    const sections = [];
    const free = [];
    const failed = [];
    for (const slot of slots) {
      const a = slot.answer ?? {};
      if (slot.status === 200) {
        const content = a.kind === 'IPHistoryLookup' ? this.historyContent(a) : this.nowContent(a, slot.cluster);
        sections.push(h('section', {class: 'ip-cluster', dataset: {cluster: slot.cluster, status: '200', match: a.match ?? ''}},
          h('h3', {}, 'In cluster ', h('span', {class: 'mono'}, slot.cluster)), ...content));
      } else if (slot.status === 404) {
        free.push(slot.cluster);
      } else {
        const why = slot.status === 403 ? 'not allowed to read there' : (a.message || `HTTP ${slot.status}`);
        failed.push(h('li', {dataset: {cluster: slot.cluster, status: String(slot.status)}}, h('span', {class: 'mono'}, slot.cluster), `: ${why}`));
      }
    }
    const several = held.length > 1;
    this.show(res.ip, q, [
      h('p', {class: 'ip-summary', dataset: {heldIn: held.join(',')}},
        several ? [h('span', {class: 'badge match match-ambiguous'}, `${held.length} clusters`), ' '] : null, summary),
      ...sections,
      free.length && held.length ? h('p', {class: 'ip-note muted'}, `Nobody holds it in ${free.join(', ')}.`) : null,
      failed.length ? h('ul', {class: 'ip-note ip-missing'}, failed) : null,
    ], held.length === 0 ? 'none' : several ? 'several' : 'one', {heldIn: held.join(','), code: '200'});
  }

  row(kind, key, role, uid, data, owner, state) {
    return h('tr', {dataset: {kind, key, role, uid, ...data}},
      h('td', {}, kind),
      h('td', {}, owner),
      h('td', {}, h('span', {class: 'mono'}, role)),
      h('td', {}, state || h('span', {class: 'muted'}, '—')),
      h('td', {class: 'mono muted'}, uid));
  }

  openButton(resource, key, obj, res, cluster) {
    return h('button', {type: 'button', class: 'link mono', onclick: (e) => this.onOpen(resource, key, obj, res, e.currentTarget, cluster)}, key);
  }

  table(head, rows) {
    return h('table', {class: 'ip-table', 'aria-labelledby': 'ip-title'},
      h('thead', {}, h('tr', {}, head.map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, rows));
  }
}
