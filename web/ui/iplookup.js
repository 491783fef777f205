// IPLookup answers "who has this IP" from GET /api/v1/ip/{ip}: every
// owner of any kind (pods, Services, nodes) with the role of the address,
// narrowed by a port when one is given, now or at a moment from the
// ownership history, saying what kind of match it is and how certain.

import {h} from './dom.js';
import {api} from './api.js';

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
      ...content);
  }

  // renderNow shows who holds the address now: pods, then Services, then
  // nodes, as the API lists them; each opens its object.
  renderNow(res, q) {
    const pods = res.pods ?? [];
    const items = res.items ?? [];
    const rows = [];
    let i = 0;
    for (const p of pods) {
      const key = `${p.namespace}/${p.name}`;
      const obj = items[i++];
      rows.push(this.row('Pod', key, 'podIP', p.uid, {hostNetwork: String(p.hostNetwork), active: String(p.active)},
        this.openButton('pods', key, obj, res),
        [p.phase || 'no phase yet', p.nodeName ? ` on ${p.nodeName}` : '', ' ',
          p.hostNetwork ? h('span', {class: 'badge badge-host'}, 'hostNetwork') : 'pod network', ' ',
          p.active ? '' : h('span', {class: 'muted'}, 'finished')]));
    }
    for (const sv of res.services ?? []) {
      const key = `${sv.namespace}/${sv.name}`;
      rows.push(this.row('Service', key, sv.role, sv.uid, {}, this.openButton('services', key, items[i++], res), ''));
    }
    for (const n of res.nodes ?? []) {
      rows.push(this.row('Node', n.name, n.role, n.uid, {}, this.openButton('nodes', n.name, items[i++], res), ''));
    }
    const explain = MATCH[res.match]?.({pods: pods.length}) ?? '';
    this.show(res.ip, q, [
      h('p', {class: 'ip-summary'},
        h('span', {class: `badge match match-${res.match}`}, res.match),
        res.via ? [' ', h('span', {class: 'badge match-via'}, `via ${res.via}`)] : null,
        ' ', explain,
        h('span', {class: 'muted'}, ` As of resourceVersion ${res.metadata?.resourceVersion ?? '?'}.`)),
      portNote(res) && h('p', {class: 'ip-note', dataset: {declared: String(res.port.declared)}}, portNote(res)),
      this.table(['Kind', 'Owner', 'Role', 'State', 'UID'], rows),
    ], res.match, {via: res.via ?? ''});
  }

  // renderHistory shows who held the address at a moment: the intervals
  // of the owners, the certainty, and how far back the history reaches.
  renderHistory(res, q) {
    const owners = res.owners ?? [];
    const rows = owners.map((o, n) => {
      const key = o.namespace ? `${o.namespace}/${o.name}` : o.name;
      const held = [when(o.from), o.since ? h('span', {class: 'muted'}, ` (its ${o.since}: present when the history began)`) : '',
        ' → ', o.to ? when(o.to) : h('span', {class: 'muted'}, 'still holds it')];
      return this.row(o.kind, key, o.role, o.uid, {order: String(n + 1), hostNetwork: String(!!o.hostNetwork)},
        h('span', {class: 'mono'}, key), [o.hostNetwork ? [h('span', {class: 'badge badge-host'}, 'hostNetwork'), ' '] : '', held]);
    });
    this.show(res.ip, q, [
      h('p', {class: 'ip-summary'},
        h('span', {class: `badge certainty certainty-${res.certainty}`}, res.certainty), ' ',
        h('span', {class: `badge match match-${res.match}`}, res.match),
        res.via ? [' ', h('span', {class: 'badge match-via'}, `via ${res.via}`)] : null,
        ' ', CERTAINTY[res.certainty] ?? '', ' ', MATCH[res.match]?.({pods: owners.filter((o) => o.kind === 'Pod').length}) ?? ''),
      h('p', {class: 'ip-note muted'}, `At ${when(res.at)}. The history reaches back to ${when(res.historySince)}.`),
      portNote(res) && h('p', {class: 'ip-note', dataset: {declared: String(res.port.declared)}}, portNote(res)),
      this.table(['Kind', 'Owner', 'Role', 'Held', 'UID'], rows),
    ], res.match, {certainty: res.certainty, at: res.at, via: res.via ?? ''});
  }

  row(kind, key, role, uid, data, owner, state) {
    return h('tr', {dataset: {kind, key, role, uid, ...data}},
      h('td', {}, kind),
      h('td', {}, owner),
      h('td', {}, h('span', {class: 'mono'}, role)),
      h('td', {}, state || h('span', {class: 'muted'}, '—')),
      h('td', {class: 'mono muted'}, uid));
  }

  openButton(resource, key, obj, res) {
    return h('button', {type: 'button', class: 'link mono', onclick: (e) => this.onOpen(resource, key, obj, res, e.currentTarget)}, key);
  }

  table(head, rows) {
    return h('table', {class: 'ip-table', 'aria-labelledby': 'ip-title'},
      h('thead', {}, h('tr', {}, head.map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, rows));
  }
}
