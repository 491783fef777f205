// FleetView is the "all clusters" table of a resource, on a fleet's root
// (docs/clusters.md, "Lists and counts across clusters"). The cluster is a
// column, sorted and filtered by the server like any other key
// (sort=cluster, filter=cluster=east); the rows are a page of the
// FleetList around what is in view; the counts are per cluster (and per
// status for pods) from the counts across clusters; and every cluster's
// slot of the answer is reported (onSlots), so that a cluster stale,
// forbidden or not serving is shown rather than silently missing.
//
// The fleet's root has no stream of its own yet: the view follows each
// answering cluster's own stream of the resource (changes only, no
// snapshot, so nothing is downloaded whole) and asks for its page and
// counts again after a change, at most once every REFRESH_MS; and every
// SLOW_MS regardless, so that the slots stay current without events. It
// follows at most MAX_FOLLOWED clusters' streams (the first that answer),
// since a client's streams are bounded together (--max-streams-per-client);
// the others' changes are seen by the SLOW_MS asking.

import {AskView, isPods} from './ask.js';
import {columnsFor} from './columns.js';
import {clock, objectKey} from './dom.js';
import {api, clusterBase, inCluster, wsProtocols} from './api.js';
import {StreamClient, streamURL} from './stream.js';

const LIMIT = 100; // rows a page holds, as AskView's window
const REFRESH_MS = 1000;
const SLOW_MS = 5000;
const MAX_FOLLOWED = 8;
const FETCH_MS = 15000;

// clusterColumn is the cluster an item came from: FleetView fills it from
// the item, beside the object, never from the object's own fields.
export const clusterColumn = {id: 'cluster', title: 'Cluster', width: 'minmax(6rem, 0.7fr)', value: () => ''};

export class FleetView extends AskView {
  // As AskView, and onSlots(slots) gets each answer's clusters member:
  // [{cluster, status, state?, total?, reason?}].
  constructor(opts) {
    super(opts);
    this.onSlots = opts.onSlots;
  }

  columnsOf(resource) {
    return [clusterColumn, ...columnsFor(resource)];
  }

  modeFor() {
    return 'fleet';
  }

  question() {
    return {...super.question(), groupBy: isPods(this.resource) ? 'cluster,status' : 'cluster'};
  }

  destroy() {
    super.destroy();
    clearTimeout(this.refreshTimer);
    for (const client of this.followed?.values() ?? []) client.stop();
    this.followed?.clear();
  }

  // poll asks the fleet's root for the page in view and the counts. It is
  // called by AskView's constructor, before this class's own constructor
  // has run: what it keeps is created here when missing.
  async poll() {
    clearTimeout(this.pollTimer);
    this.fetching?.abort();
    const ctl = new AbortController();
    this.fetching = ctl;
    this.dirty = false;
    const late = setTimeout(() => ctl.abort(), FETCH_MS); // a hung request must not stop the asking
    const {resource, groupBy: by, ...q} = this.question();
    const sel = {namespace: q.namespace, labelSelector: q.labelSelector, index: this.filters.index, value: this.filters.value, filter: q.filter};
    try {
      const [page, counts] = await Promise.all([
        api.list(resource, {...sel, sort: q.sort, fields: q.fields, offset: this.offset, limit: LIMIT}, {signal: ctl.signal}),
        api.counts(resource, {...sel, groupBy: by}, {signal: ctl.signal}),
      ]);
      if (this.destroyed || this.fetching !== ctl) return; // a newer question replaced this one
      this.slots = page.clusters ?? [];
      this.onSlots?.(this.slots);
      this.follow(this.slots);
      this.held = (page.items ?? []).map((item) => this.row(item));
      this.answer(page.metadata?.totalItemCount ?? this.held.length, counts);
    } catch (err) {
      if (this.destroyed || this.fetching !== ctl) return;
      if (err.code) this.fail(err.message);
      else this.setState('disconnected');
    } finally {
      clearTimeout(late);
    }
    this.fetching = null;
    if (this.dirty) this.changed();
    this.pollTimer = setTimeout(() => this.poll(), SLOW_MS);
  }

  // changed asks again after a cluster's change: one request at a time,
  // at most one every REFRESH_MS, however many changes come.
  changed() {
    if (this.destroyed) return;
    if (this.fetching) {
      this.dirty = true;
      return;
    }
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = 0;
      if (this.fetching) this.dirty = true;
      else this.poll();
    }, REFRESH_MS);
  }

  // follow keeps one changes-only subscription open on the stream of each
  // cluster that answered, and closes those of clusters that no longer do.
  follow(slots) {
    this.followed ??= new Map();
    const answering = new Set(slots.filter((s) => s.status === 200).map((s) => s.cluster).slice(0, MAX_FOLLOWED));
    for (const [name, client] of this.followed) {
      if (answering.has(name)) continue;
      client.stop();
      this.followed.delete(name);
    }
    for (const name of answering) {
      if (this.followed.has(name)) continue;
      const client = new StreamClient(streamURL(clusterBase(name)), () => wsProtocols());
      const q = {resource: this.resource.name, snapshot: false};
      for (const k of ['namespace', 'labelSelector', 'index', 'value']) if (this.filters[k]) q[k] = this.filters[k];
      client.subscribe(q, {
        event: () => this.changed(),
        resync: () => this.changed(),
        error: () => this.changed(), // the slot says why at the next answer
      });
      client.connect();
      this.followed.set(name, client);
    }
  }

  row(item) {
    const obj = {kind: this.resource.kind, ...item.object};
    return {
      key: `${item.cluster}/${objectKey(obj)}`, cluster: item.cluster, obj, rv: obj.metadata?.resourceVersion ?? '',
      values: this.columns.map((c) => (c === clusterColumn ? item.cluster : c.value(obj))),
      tones: this.columns.map((c) => c.tone?.(obj)),
      change: null,
    };
  }

  // read fetches the whole object of a row from its own cluster.
  read(key) {
    const row = this.held.find((r) => r.key === key);
    if (!row) return Promise.reject(new Error('the row is no longer in view'));
    return inCluster(row.cluster).get(this.resource.name, objectKey(row.obj));
  }

  liveText(rows, by) {
    const n = this.followed?.size ?? 0;
    const order = this.ask.sort ? by : 'by cluster, then namespace/name';
    return `All clusters · asked at ${clock(Date.now())} · ${rows} · ${order} · asked again on changes in ${n} cluster${n === 1 ? '' : 's'}`;
  }
}
