// FleetView is the "all clusters" table of a resource, on a fleet's root
// (docs/clusters.md, "Lists and counts across clusters"). The cluster is a
// column, sorted and filtered by the server like any other key
// (sort=cluster, filter=cluster=east); the rows are a page of the
// FleetList around what is in view; the counts are per cluster (and per
// status for pods) from the counts across clusters; and every cluster's
// slot of the answer is reported (onSlots), so that a cluster stale,
// forbidden or not serving is shown rather than silently missing.
//
// The view follows one stream across clusters on the root (a subscribe
// on the page's stream, which rests at the root for all clusters: changes
// only, no snapshot, so nothing is downloaded whole, with the view's
// selection and the clusters it covers) and asks for its page and counts
// again after a change, at most once every REFRESH_MS. A CLUSTER message
// that differs from the cluster's slot (a state change, 403, removed, a
// cluster added) asks again at once and tells the app (onClusters), so
// the slots and the picker follow. Only while the stream is not live
// (refused, or reconnecting) does it ask every SLOW_MS.

import {AskView, isPods} from './ask.js';
import {columnsFor} from './columns.js';
import {clock, objectKey} from './dom.js';
import {api, inCluster} from './api.js';

const LIMIT = 100; // rows a page holds, as AskView's window
const REFRESH_MS = 1000;
const SLOW_MS = 5000;
const FETCH_MS = 15000;

// clusterColumn is the cluster an item came from: FleetView fills it from
// the item, beside the object, never from the object's own fields.
export const clusterColumn = {id: 'cluster', title: 'Cluster', width: 'minmax(6rem, 0.7fr)', value: () => ''};

export class FleetView extends AskView {
  // As AskView, and onSlots(slots) gets each answer's clusters member:
  // [{cluster, status, state?, total?, reason?}]; onClusters() is told
  // when the stream says a cluster's part changed.
  constructor(opts) {
    super(opts);
    this.onSlots = opts.onSlots;
    this.onClusters = opts.onClusters;
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
    if (this.onStreamDown) this.stream.removeEventListener('state', this.onStreamDown);
    clearTimeout(this.refreshTimer);
    this.following?.close();
    this.following = null;
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
      this.follow();
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
    if (!this.live) this.pollTimer = setTimeout(() => this.poll(), SLOW_MS);
  }

  // changed asks again after a change: one request at a time, at most
  // one every REFRESH_MS however many changes come; now asks at once.
  changed(now = false) {
    if (this.destroyed) return;
    if (this.fetching) {
      this.dirty = true;
      return;
    }
    if (this.refreshTimer && !now) return;
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = 0;
      if (this.fetching) this.dirty = true;
      else this.poll();
    }, now ? 0 : REFRESH_MS);
  }

  // follow opens, once, the view's one changes-only subscription across
  // clusters on the page's stream (at the root). It covers every cluster,
  // or the one a filter cluster=name names.
  follow() {
    if (this.following || this.destroyed) return;
    const q = {resource: this.resource.name, snapshot: false};
    for (const k of ['namespace', 'labelSelector', 'index', 'value']) if (this.filters[k]) q[k] = this.filters[k];
    const only = (this.ask.filter ?? []).map((f) => /^cluster\s*==?\s*"?([^",]+)"?$/.exec(f.trim())).find(Boolean);
    if (only) q.cluster = only[1];
    this.following = this.stream.subscribe(q, {
      event: () => this.changed(),
      synced: () => this.setLive(true),
      resync: () => this.changed(),
      cluster: (msg) => this.clusterChanged(msg),
      error: () => { // refused: ask every SLOW_MS, and try again then
        this.setLive(false);
        this.changed();
        setTimeout(() => this.following && this.stream.retry(this.following), SLOW_MS);
      },
    });
    this.onStreamDown ??= (e) => {
      if (e.detail.state === 'reconnecting') this.setLive(false);
    };
    this.stream.addEventListener('state', this.onStreamDown);
  }

  setLive(live) {
    const was = this.live;
    if (live === was) return;
    this.live = live;
    clearTimeout(this.pollTimer);
    if (!live && !this.fetching) this.pollTimer = setTimeout(() => this.poll(), SLOW_MS);
    if (live && was === false) this.changed(); // what changed while it was down
  }

  // clusterChanged is a CLUSTER message: when it differs from what the
  // cluster's slot says, the slots and the picker are asked for at once.
  clusterChanged(msg) {
    this.setLive(true);
    const slot = this.slots?.find((s) => s.cluster === msg.cluster);
    const status = msg.status ?? 200;
    if (slot && slot.status === status && (status !== 200 || (slot.state ?? '') === (msg.state ?? ''))) return;
    this.changed(true);
    this.onClusters?.();
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
    const order = this.ask.sort ? by : 'by cluster, then namespace/name';
    const how = this.live ? 'asked again on changes in any cluster' : `the stream across clusters is down: asked every ${SLOW_MS / 1000} s`;
    return `All clusters · asked at ${clock(Date.now())} · ${rows} · ${order} · ${how}`;
  }
}
