// ResourceView is the live table of one resource with one set of filters:
// it subscribes over the shared stream, feeds an ObjectStore, and draws the
// store's rows (searched and sorted) in the VirtualTable. It reports its
// state (loading, live, reconnecting, error) and what happened across
// reconnects (resumed, or resynced from a fresh snapshot).

import {columnsFor} from './columns.js';
import {ObjectStore} from './store.js';
import {clock} from './dom.js';

const RETRY_MS = 2000;

export class ResourceView {
  // filters: {namespace, labelSelector, index, value}. onState(state) gets
  // {phase, text}; onNotice(text, tone) reports reconnects and resyncs.
  constructor({resource, filters, stream, table, onState, onNotice, onRows}) {
    this.resource = resource;
    this.filters = filters;
    this.stream = stream;
    this.table = table;
    this.onState = onState;
    this.onNotice = onNotice;
    this.onRows = onRows;
    this.columns = columnsFor(resource);
    this.store = new ObjectStore(this.columns);
    this.sort = {id: '', desc: false};
    this.quick = '';
    this.frame = 0;
    this.position = '';
    this.resyncReason = '';
    this.disconnected = false;
    this.retryTimer = 0;
    this.phase = 'loading';

    table.onRange = null;
    table.setLabel(`${resource.name}${describe(filters) ? `, ${describe(filters)}` : ''}`);
    table.setColumns(this.columns, this.sort);
    table.setRows([]);
    table.setEmptyMessage('Loading…');
    this.unlisten = this.store.onChange(() => this.schedule());
    this.sub = stream.subscribe({resource: resource.name, ...filters}, this);
    this.onStreamState = (e) => this.streamState(e.detail);
    stream.addEventListener('state', this.onStreamState);
    this.ticker = setInterval(() => table.render(), 1000); // ages and change highlights
  }

  destroy() {
    clearInterval(this.ticker);
    clearTimeout(this.retryTimer);
    cancelAnimationFrame(this.frame);
    this.stream.removeEventListener('state', this.onStreamState);
    this.sub.close();
    this.unlisten();
  }

  // Stream handler methods (see stream.js).

  begin({mode}) {
    this.store.begin(mode);
    this.setState(mode === 'resume' ? 'resuming' : 'loading');
  }

  event(msg, {snapshot}) {
    this.store.apply(msg, {snapshot});
  }

  synced({mode, resourceVersion, replayed}) {
    const swept = this.store.synced();
    this.position = resourceVersion;
    const at = clock(Date.now());
    if (mode === 'resume' && this.disconnected) {
      this.onNotice(`${at}: reconnected and resumed the stream from where it stopped; ` +
        `${replayed} missed change${replayed === 1 ? '' : 's'} replayed, nothing reloaded.`, 'ok');
    } else if (this.resyncReason) {
      this.onNotice(`${at}: resynced. The server could not resume the stream (${this.resyncReason}), ` +
        `so the table was reloaded from a fresh snapshot${swept ? `; ${swept} object${swept === 1 ? '' : 's'} had gone` : ''}.`, 'warn');
    }
    this.disconnected = false;
    this.resyncReason = '';
    this.table.setEmptyMessage(`No ${this.resource.name} match.`);
    this.setState('live');
  }

  bookmark(rv) {
    this.position = rv;
    if (this.phase === 'live') this.setState('live');
  }

  resync(reason) {
    this.resyncReason = reason;
    this.setState('resyncing');
  }

  error(message, code) {
    this.setState('error', message);
    this.table.setEmptyMessage(message);
    // Errors that pass by themselves (not synced yet, too many streams) are
    // retried; a bad filter is not, until the filters change.
    if (code === 503 || code === 429) {
      this.retryTimer = setTimeout(() => this.stream.retry(this.sub), RETRY_MS);
    }
  }

  streamState({state, delay}) {
    if (state === 'reconnecting') {
      this.disconnected = true;
      this.setState('disconnected', delay);
    }
  }

  setState(phase, detail) {
    this.phase = phase;
    const n = this.store.rows.size.toLocaleString('en-US');
    const live = this.store.live;
    const text = {
      loading: `Loading snapshot… ${n} received`,
      resuming: 'Reconnected; catching up on missed changes…',
      resyncing: 'Resyncing from a fresh snapshot…',
      live: `Live · resourceVersion ${this.position || '—'} · ${live.added} added, ${live.modified} modified, ${live.deleted} deleted since loaded`,
      disconnected: `Disconnected. Showing the last state received; reconnecting${detail ? ` in ${Math.ceil(detail / 1000)}s` : ''}…`,
      error: `Stream error: ${detail}`,
    }[phase];
    this.onState({phase, text});
  }

  setSort(id) {
    this.sort = this.sort.id === id ? {id, desc: !this.sort.desc} : {id, desc: false};
    this.table.setColumns(this.columns, this.sort);
    this.refresh();
  }

  setQuick(text) {
    this.quick = text.trim().toLowerCase();
    this.refresh();
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.refresh());
  }

  // refresh recomputes the rows shown: searched, then sorted.
  refresh() {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    let rows = [...this.store.rows.values()];
    const total = rows.length;
    if (this.quick) rows = rows.filter((r) => r.search.includes(this.quick));
    const i = this.columns.findIndex((c) => c.id === this.sort.id);
    const cmp = i < 0 ? null : (this.columns[i].compare ?? compare);
    rows.sort((a, b) => {
      const c = cmp ? cmp(a.values[i], b.values[i]) : 0;
      return (this.sort.desc ? -c : c) || compare(a.key, b.key);
    });
    this.table.setRows(rows);
    this.onRows({total, shown: rows.length});
    if (this.phase === 'live' || this.phase === 'loading') this.setState(this.phase);
  }
}

function compare(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function describe(f) {
  return [f.namespace && `namespace ${f.namespace}`, f.labelSelector && `labels ${f.labelSelector}`,
    f.index && `${f.index}=${f.value ?? ''}`].filter(Boolean).join(', ');
}
