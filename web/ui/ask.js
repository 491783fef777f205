// AskView is the table of a resource too large to download: it asks the
// server instead (docs/query.md). The server sorts (a click on a column
// header), filters (the filter chips, one filter= each), counts (per
// status and node for pods, per namespace otherwise) and projects
// (fields=, so rows are small); the view holds only a window of about 100
// rows around what is in view, and scrolling moves the window.
//
// It keeps the window live over the multiplexed stream (a window op, see
// window.js). Against a server without live windows it asks the REST API
// for the same page and counts, again every POLL_MS.

import {columnsFor, podFields} from './columns.js';
import {objectKey, clock} from './dom.js';
import {api} from './api.js';
import {applyOps, unsupported} from './window.js';

const LIMIT = 100; // rows a window holds
const MARGIN = 30; // rows held above the first row in view
const POLL_MS = 5000;
const SCROLL_MS = 80; // a scroll settles this long before the window moves

export class AskView {
  // filters: {namespace, labelSelector, index, value}; ask: {filter: [...],
  // sort: 'key' or '-key'}. onCounts(counts) gets the counts route's
  // answer; onAsk({sort}) asks the app for another question.
  constructor({resource, filters, ask, stream, table, onState, onNotice, onRows, onCounts, onAsk}) {
    this.resource = resource;
    this.filters = filters;
    this.ask = ask;
    this.stream = stream;
    this.table = table;
    this.onState = onState;
    this.onNotice = onNotice;
    this.onRows = onRows;
    this.onCounts = onCounts;
    this.onAsk = onAsk;
    this.store = null; // rows are projections: the detail panel fetches the object
    this.columns = this.columnsOf(resource);
    this.sort = parseSort(ask.sort, this.columns);
    this.offset = 0;
    this.held = []; // rows offset … offset+held.length-1
    this.total = 0;
    this.phase = 'loading';
    this.mode = this.modeFor(filters);
    this.scrollTimer = 0;
    this.pollTimer = 0;
    this.fetching = null;
    this.destroyed = false;

    const vt = table.el.dataset;
    vt.mode = this.mode;
    vt.asked = ask.sort ?? '';
    vt.answered = '\u0000'; // nothing answered yet
    table.setLabel(`${resource.name}, asked of the server`);
    table.setColumns(this.columns, this.sort);
    table.setRows([]);
    table.setEmptyMessage('Asking the server…');
    table.onRange = (start, end) => this.range(start, end);
    this.setState('loading');
    this.onStreamState = (e) => {
      if (e.detail.state === 'reconnecting' && this.mode === 'window') this.setState('disconnected', e.detail.delay);
    };
    stream.addEventListener('state', this.onStreamState);
    if (this.mode === 'window') this.openWindow();
    else this.poll();
  }

  // columnsOf and modeFor are what a subclass may change: its columns, and
  // how it asks (window: over the stream; rest: the REST API again every
  // POLL_MS). Windows select by namespace and labels only.
  columnsOf(resource) {
    return columnsFor(resource);
  }

  modeFor(filters) {
    return filters.index ? 'rest' : 'window';
  }

  destroy() {
    this.destroyed = true;
    clearTimeout(this.scrollTimer);
    clearTimeout(this.pollTimer);
    this.fetching?.abort();
    this.sub?.close();
    this.countsSub?.close();
    this.stream.removeEventListener('state', this.onStreamState);
    this.table.onRange = null;
    delete this.table.el.dataset.asked;
    delete this.table.el.dataset.mode;
    delete this.table.el.dataset.answered;
    this.table.el.removeAttribute('aria-busy');
  }

  // question is what every request of this view asks.
  question() {
    const q = {resource: this.resource.name, filter: this.ask.filter ?? [], sort: this.ask.sort ?? ''};
    for (const k of ['namespace', 'labelSelector']) if (this.filters[k]) q[k] = this.filters[k];
    if (isPods(this.resource)) q.fields = podFields;
    q.groupBy = groupBy(this.resource);
    return q;
  }

  // The window, over the stream.

  // openWindow opens two windows: the rows, and (when the resource has
  // counts) a window of one row for its counts, so the rows never wait for
  // the counts to be computed. The counts do not depend on the sort: their
  // window asks without it, so a click on a header finds them made.
  openWindow() {
    const {groupBy: by, ...q} = this.question();
    this.sub = this.stream.window({...q, offset: this.offset, limit: LIMIT}, this);
    if (!by) return;
    const counts = (msg) => msg.counts && this.onCounts(msg.counts);
    this.countsSub = this.stream.window({...q, sort: '', fields: 'metadata.name', groupBy: by, offset: 0, limit: 1}, {
      window: counts, changes: counts,
      error: (message, code) => {
        if (!unsupported(message, code)) this.onNotice(`Counts: ${message}`, 'bad');
      },
    });
  }

  // reask takes another sort of the same rows (a click on a header): only
  // the rows' window is asked again, the counts' window (asked without
  // the sort) is kept, and the rows held stay shown, marked busy, until
  // the new order's arrive. False when the view cannot (another filter,
  // or not over a window): the app then makes a new view.
  reask(ask) {
    if (this.mode !== 'window' || this.destroyed || String(ask.filter ?? []) !== String(this.ask.filter ?? [])) return false;
    if ((ask.sort ?? '') === (this.ask.sort ?? '')) return true;
    this.ask = {...this.ask, sort: ask.sort ?? ''};
    this.sort = parseSort(this.ask.sort, this.columns);
    clearTimeout(this.scrollTimer);
    this.sub?.close();
    this.offset = 0;
    const vt = this.table.el;
    vt.dataset.asked = this.ask.sort;
    vt.setAttribute('aria-busy', 'true');
    this.table.setColumns(this.columns, this.sort);
    this.table.viewport.scrollTop = 0;
    this.setState('loading');
    const {groupBy: _, ...q} = this.question();
    this.sub = this.stream.window({...q, offset: 0, limit: LIMIT}, this);
    return true;
  }

  begin({mode}) {
    if (mode === 'resume') this.setState('resuming');
  }

  window(msg) {
    this.offset = msg.offset ?? 0;
    this.held = (msg.rows ?? []).map((o) => this.row(o));
    this.answer(msg.total, msg.counts);
  }

  changes(msg) {
    const rows = this.held.slice();
    applyOps(rows, (msg.ops ?? []).map((op) => (op.row ? {...op, row: this.row(op.row, true)} : op)));
    this.held = rows;
    this.answer(msg.total, msg.counts);
  }

  resync() {
    this.setState('resuming');
  }

  error(message, code) {
    if (this.mode === 'window' && unsupported(message, code)) {
      // An older server: ask the REST API instead.
      this.mode = 'rest';
      this.table.el.dataset.mode = 'rest';
      this.sub?.close();
      this.countsSub?.close();
      this.sub = null;
      this.poll();
      return;
    }
    this.fail(message);
  }

  // The same question over REST, for a server without live windows.

  async poll() {
    clearTimeout(this.pollTimer);
    this.fetching?.abort();
    const ctl = new AbortController();
    this.fetching = ctl;
    const {resource, groupBy: by, ...q} = this.question();
    const sel = {namespace: q.namespace, labelSelector: q.labelSelector, index: this.filters.index, value: this.filters.value, filter: q.filter};
    try {
      const [page, counts] = await Promise.all([
        api.list(resource, {...sel, sort: q.sort, fields: q.fields, offset: this.offset, limit: LIMIT}, {signal: ctl.signal}),
        by ? api.counts(resource, {...sel, groupBy: by}, {signal: ctl.signal}) : null,
      ]);
      if (this.destroyed || ctl.signal.aborted) return;
      this.held = page.items.map((o) => this.row({kind: this.resource.kind, ...o}));
      this.answer(page.metadata?.totalItemCount ?? page.items.length, counts);
    } catch (err) {
      if (ctl.signal.aborted || this.destroyed) return;
      if (err.code === 400 || err.code === 403 || err.code === 429) {
        this.fail(err.message);
        if (err.code !== 429) return;
      }
    }
    if (!this.destroyed) this.pollTimer = setTimeout(() => this.poll(), POLL_MS);
  }

  // What both paths share.

  row(obj, changed = false) {
    const values = this.columns.map((c) => c.value(obj));
    return {
      key: objectKey(obj), obj, rv: obj.metadata?.resourceVersion ?? '', values,
      tones: this.columns.map((c) => c.tone?.(obj)),
      change: changed ? {type: 'MODIFIED', at: Date.now()} : null,
    };
  }

  answer(total, counts, phase = 'live') {
    this.total = total ?? this.held.length;
    // One sparse array for the whole answer, holding only the window: it
    // is kept from answer to answer rather than allocated for each.
    const rows = this.rows ?? [];
    for (const i of this.filled ?? []) delete rows[i];
    rows.length = this.total;
    this.filled = [];
    for (let i = 0; i < this.held.length && this.offset + i < this.total; i++) {
      rows[this.offset + i] = this.held[i];
      this.filled.push(this.offset + i);
    }
    this.rows = rows;
    this.table.setRows(rows);
    this.table.el.dataset.answered = this.ask.sort ?? '';
    this.table.el.removeAttribute('aria-busy');
    this.table.setEmptyMessage(`No ${this.resource.name} match.`);
    if (counts) this.onCounts(counts);
    this.onRows({total: this.total, shown: this.total});
    this.setState(phase);
  }

  fail(message) {
    this.setState('error', message);
    this.table.setEmptyMessage(message);
    this.onNotice(message, 'bad');
  }

  // range moves the window when rows outside it come into view.
  range(start, end) {
    const held = this.offset + this.held.length;
    if (start >= this.offset && (end <= held || held >= this.total)) return;
    clearTimeout(this.scrollTimer);
    this.scrollTimer = setTimeout(() => {
      this.offset = Math.max(0, start - MARGIN);
      if (this.mode === 'window') this.sub?.scroll(this.offset, LIMIT);
      else this.poll();
    }, SCROLL_MS);
  }

  setSort(id) {
    const col = this.columns.find((c) => c.id === id);
    if (!col) return;
    const desc = this.sort.id === id ? !this.sort.desc : false;
    this.onAsk({sort: `${desc ? '-' : ''}${col.key ?? col.id}`});
  }

  setQuick() {
    // Searching the rows held would search a page; the filter chips ask
    // the server instead.
  }

  liveText(rows, by) {
    return this.mode === 'window' ? `Live window · ${rows} · ${by}`
      : `Asked at ${clock(Date.now())} · ${rows} · ${by} · this server has no live windows: asking again every ${POLL_MS / 1000}s`;
  }

  setState(phase, detail) {
    this.phase = phase;
    const rows = this.held.length ? `rows ${(this.offset + 1).toLocaleString('en-US')}–${(this.offset + this.held.length).toLocaleString('en-US')} of ${this.total.toLocaleString('en-US')}` : 'no rows';
    const by = this.ask.sort ? `sorted by ${this.ask.sort}` : 'in namespace/name order';
    const text = {
      loading: 'Asking the server…',
      resuming: 'Reconnected; catching up…',
      live: this.liveText(rows, by),
      error: `The server refused the question: ${detail}`,
      disconnected: `Disconnected. Showing the last rows received; reconnecting${detail ? ` in ${Math.ceil(detail / 1000)}s` : ''}…`,
    }[phase];
    this.onState({phase, text});
  }
}

export function isPods(r) {
  return r.plural === 'pods' && !r.group;
}

// groupBy is what the counts of a resource are per.
function groupBy(r) {
  if (isPods(r)) return 'status,node';
  return r.namespaced ? 'namespace' : '';
}

// parseSort finds the column a sort key names, for the header's arrow.
function parseSort(sort, columns) {
  if (!sort) return {id: '', desc: false};
  const desc = sort.startsWith('-');
  const key = desc ? sort.slice(1) : sort;
  const col = columns.find((c) => (c.key ?? c.id) === key);
  return {id: col?.id ?? '', desc};
}
