// ObjectStore holds what one subscription has delivered: the objects (as
// table rows) and, per object, its recent changes as diffs. It is fed by the
// stream handler and read by the table and the detail panel.
//
// A snapshot that follows a resync is applied in place: objects it brings
// again replace the old ones (recorded as a change when they differ), and
// objects it no longer brings are removed when SYNCED arrives. The table
// never empties and refills.

import {changes} from './diff.js';
import {objectKey} from './dom.js';

const CHANGES_PER_OBJECT = 30;
const OBJECTS_WITH_CHANGES = 2000;
const GONE_KEPT = 500;
// How long a row shows that it was added or changed.
export const FLASH_MS = 2500;

export class ObjectStore {
  constructor(columns) {
    this.columns = columns;
    this.rows = new Map(); // key → row
    this.history = new Map(); // key → changes, oldest first
    this.gone = new Map(); // key → last state of recently deleted objects
    this.sweep = null; // keys not yet seen again by the current snapshot
    this.loaded = false; // a snapshot has completed once
    this.version = 0;
    this.live = {added: 0, modified: 0, deleted: 0};
    this.listeners = new Set();
  }

  // onChange registers fn(key) to be called after every change; key is the
  // object that changed, or '' for many. It returns an unregister function.
  onChange(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  changed(key) {
    this.version++;
    for (const fn of this.listeners) fn(key);
  }

  makeRow(obj, change = null) {
    const values = this.columns.map((c) => c.value(obj));
    return {
      key: objectKey(obj),
      obj,
      rv: obj.metadata?.resourceVersion ?? '',
      values,
      tones: this.columns.map((c) => c.tone?.(obj)),
      search: values.join('\u0000').toLowerCase(),
      change,
    };
  }

  // begin is called when the subscription (re)starts.
  begin(mode) {
    if (mode === 'snapshot') this.sweep = new Set(this.rows.keys());
  }

  apply(msg, {snapshot}) {
    const obj = msg.object;
    if (!obj?.metadata?.name) return;
    const key = objectKey(obj);
    const prev = this.rows.get(key);
    const at = Date.now();
    if (snapshot) this.sweep?.delete(key);
    if (msg.type === 'DELETED') {
      if (!prev) return;
      this.rows.delete(key);
      this.remember(key, obj);
      this.record(key, {type: 'DELETED', rv: msg.resourceVersion, at});
      this.live.deleted++;
      return this.changed(key);
    }
    if (prev && prev.rv === obj.metadata.resourceVersion) return; // already held
    let change = null;
    if (!snapshot) {
      change = {type: prev ? 'MODIFIED' : 'ADDED', at};
      this.live[prev ? 'modified' : 'added']++;
      this.record(key, prev
        ? {type: 'MODIFIED', rv: msg.resourceVersion, at, changes: changes(prev.obj, obj, msg.patch), patched: !!msg.patch}
        : {type: 'ADDED', rv: msg.resourceVersion, at});
    } else if (this.loaded) {
      // A snapshot after a resync: tell what happened while we could not see.
      change = {type: prev ? 'MODIFIED' : 'ADDED', at};
      this.record(key, prev
        ? {type: 'MODIFIED', rv: obj.metadata.resourceVersion, at, changes: changes(prev.obj, obj), resync: true}
        : {type: 'ADDED', rv: obj.metadata.resourceVersion, at, resync: true});
    }
    this.rows.set(key, this.makeRow(obj, change));
    this.gone.delete(key);
    this.changed(key);
  }

  // synced ends a snapshot: objects it did not bring again are gone.
  synced() {
    const at = Date.now();
    for (const key of this.sweep ?? []) {
      const row = this.rows.get(key);
      this.rows.delete(key);
      this.remember(key, row.obj);
      this.record(key, {type: 'DELETED', rv: '', at, resync: true});
    }
    const swept = this.sweep?.size ?? 0;
    this.sweep = null;
    this.loaded = true;
    this.changed('');
    return swept;
  }

  record(key, change) {
    let list = this.history.get(key);
    if (list) this.history.delete(key); // re-insert: most recently changed last
    else list = [];
    list.push(change);
    if (list.length > CHANGES_PER_OBJECT) list.shift();
    this.history.set(key, list);
    if (this.history.size > OBJECTS_WITH_CHANGES) this.history.delete(this.history.keys().next().value);
  }

  remember(key, obj) {
    this.gone.set(key, obj);
    if (this.gone.size > GONE_KEPT) this.gone.delete(this.gone.keys().next().value);
  }

  // object returns the current object with this key, or its last state and
  // deleted: true.
  object(key) {
    const row = this.rows.get(key);
    if (row) return {obj: row.obj, deleted: false};
    const obj = this.gone.get(key);
    return obj ? {obj, deleted: true} : null;
  }

  changesOf(key) {
    return this.history.get(key) ?? [];
  }
}
