// StreamClient keeps one WebSocket to /api/v1/stream carrying every
// subscription of the page, and keeps those subscriptions going across
// disconnects:
//
//   - a new subscription asks for a snapshot (ADDED items, then SYNCED);
//   - after a disconnect it resumes from the last position it was told (the
//     resourceVersion of the last event, SYNCED or BOOKMARK): the server
//     replays what was missed, then SYNCED;
//   - when the server cannot resume (RESYNC_REQUIRED) it starts again with
//     a snapshot, and the handler is told, so the page can say so.
//
// Each attempt gets a fresh wire id, so late messages of an ended attempt
// can never be mistaken for the current one.
//
// A live window (see window.js) is a subscription too: it is sent as a
// window op, resumed after a disconnect with the resume token of the last
// message applied, and moved with scroll.

import {windowMessage} from './window.js';

const MIN_DELAY = 500;
const MAX_DELAY = 10000;

// Subscription is a handle on one logical stream. Its handler is an object
// with optional methods:
//   begin({mode})               an attempt starts: mode is 'snapshot' or 'resume'
//   event(msg, {snapshot})      ADDED, MODIFIED or DELETED; snapshot items are ADDED
//   synced({mode, resourceVersion, replayed})
//   resync(reason)              the server ended the stream; a snapshot follows
//   error(message, code)        the server refused the subscription (code: as HTTP)
//   cluster(msg)                CLUSTER: how a cluster takes part in a stream
//                               across clusters (its state, or 403/404)
// A subscription across clusters (query.cluster: '' for every cluster, or
// names) resumes from the stream's resume token, which holds a position
// per cluster; a cluster's RESYNC_REQUIRED restarts that cluster alone,
// in the same stream, so the handler is told and nothing is sent again.
// A window's handler has begin, error and resync, and instead of the
// event methods:
//   window(msg)                 WINDOW: the whole window
//   changes(msg)                WINDOW_CHANGES: ops to apply; throwing asks for the whole window again
export class Subscription {
  constructor(client, query, handler, kind = 'watch') {
    this.client = client;
    this.query = query;
    this.handler = handler;
    this.kind = kind;
    this.resume = ''; // a window's resume token: of the last message applied
    this.position = ''; // where to resume from; '' until the first SYNCED
    this.wireId = '';
    this.mode = '';
    this.synced = false;
    this.replayed = 0;
    this.closed = false;
  }

  close() {
    this.client.unsubscribe(this);
  }

  // scroll moves a window to rows offset … offset+limit-1; the server
  // answers with a fresh WINDOW.
  scroll(offset, limit) {
    this.query = {...this.query, offset, limit};
    this.resume = '';
    if (this.wireId) this.client.write({op: 'scroll', id: this.wireId, offset, limit});
  }
}

export class StreamClient extends EventTarget {
  // protocols() gives the subprotocols to offer on each connection (they
  // carry the bearer token, which may change).
  constructor(url, protocols = () => []) {
    super();
    this.url = url;
    this.protocols = protocols;
    this.ws = null;
    this.subs = new Set();
    this.byWire = new Map();
    this.seq = 0;
    this.attempt = 0;
    this.timer = 0;
    this.state = 'idle';
    this.everOpened = false;
  }

  start() {
    if (!this.listening) {
      this.listening = true;
      window.addEventListener('online', () => this.reconnectNow());
      document.addEventListener('visibilitychange', () => {
        if (document.visibilityState === 'visible') this.reconnectNow();
      });
    }
    this.stopped = false;
    this.connect();
  }

  // stop closes the connection and does not reconnect until start (or
  // setURL) is called; subscriptions are kept.
  stop() {
    clearTimeout(this.timer);
    this.stopped = true;
    this.drop();
    this.attempt = 0;
    this.setState('stopped');
  }

  // setURL moves the stream to another address (another cluster's
  // prefix): subscriptions open there start again from a snapshot, since
  // a position is one server's.
  setURL(url) {
    if (url === this.url && !this.stopped) return;
    this.url = url;
    for (const sub of this.subs) {
      sub.position = '';
      sub.resume = '';
    }
    this.everOpened = false;
    this.stopped = false;
    this.restart();
  }

  subscribe(query, handler) {
    const sub = new Subscription(this, query, handler);
    this.subs.add(sub);
    if (this.ws?.readyState === WebSocket.OPEN) this.send(sub);
    return sub;
  }

  // window opens a live window (see window.js) for query: resource and the
  // window op's optional fields.
  window(query, handler) {
    const sub = new Subscription(this, query, handler, 'window');
    this.subs.add(sub);
    if (this.ws?.readyState === WebSocket.OPEN) this.send(sub);
    return sub;
  }

  unsubscribe(sub) {
    if (sub.closed) return;
    sub.closed = true;
    this.subs.delete(sub);
    if (sub.wireId) {
      this.byWire.delete(sub.wireId);
      this.write({op: 'unsubscribe', id: sub.wireId});
    }
  }

  // retry starts a new attempt of a subscription the server refused (ERROR),
  // for errors that may pass, such as a resource not synced yet.
  retry(sub) {
    if (!sub.closed && !sub.wireId && this.ws?.readyState === WebSocket.OPEN) this.send(sub);
  }

  // reconnectNow skips the back-off wait when there is reason to think the
  // server is back (the browser went online, the tab became visible).
  reconnectNow() {
    if (this.state === 'reconnecting') {
      clearTimeout(this.timer);
      this.connect();
    }
  }

  setState(state, detail = {}) {
    this.state = state;
    this.dispatchEvent(new CustomEvent('state', {detail: {state, ...detail}}));
  }

  connect() {
    this.setState('connecting', {attempt: this.attempt});
    let ws;
    try {
      ws = new WebSocket(this.url, this.protocols());
    } catch (err) {
      this.scheduleReconnect(String(err));
      return;
    }
    this.ws = ws;
    ws.onopen = () => {
      const resumed = this.everOpened;
      this.everOpened = true;
      this.attempt = 0;
      this.setState('open', {resumed});
      for (const sub of this.subs) this.send(sub);
    };
    ws.onmessage = (e) => this.receive(e.data);
    ws.onclose = (e) => {
      if (this.ws !== ws || this.stopped) return;
      this.drop();
      this.scheduleReconnect(e.reason || (e.code === 1006 ? 'connection lost' : `closed (${e.code})`));
    };
  }

  // drop forgets the current connection; subscriptions keep their
  // positions and resume on the next one.
  drop() {
    const ws = this.ws;
    this.ws = null;
    ws?.close();
    for (const sub of this.subs) {
      if (sub.wireId) this.byWire.delete(sub.wireId);
      sub.wireId = '';
    }
  }

  // restart reconnects at once, with fresh credentials.
  restart() {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.drop();
    this.attempt = 0;
    this.connect();
  }

  scheduleReconnect(reason) {
    const base = Math.min(MAX_DELAY, MIN_DELAY * 2 ** this.attempt);
    const delay = Math.round(base * (0.5 + Math.random() / 2));
    this.attempt++;
    this.setState('reconnecting', {delay, reason, attempt: this.attempt});
    this.timer = setTimeout(() => this.connect(), delay);
  }

  write(msg) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  // send starts an attempt of sub: a resume when it has a position, else a
  // snapshot.
  send(sub) {
    if (sub.wireId) this.byWire.delete(sub.wireId);
    sub.wireId = `s${++this.seq}`;
    sub.mode = sub.position ? 'resume' : 'snapshot';
    sub.synced = false;
    sub.replayed = 0;
    this.byWire.set(sub.wireId, sub);
    if (sub.kind === 'window') {
      sub.mode = sub.resume ? 'resume' : 'snapshot';
      sub.handler.begin?.({mode: sub.mode});
      this.write(windowMessage(sub.wireId, sub.query, sub.resume));
      return;
    }
    const msg = {op: 'subscribe', id: sub.wireId, resource: sub.query.resource, diff: 'merge'};
    for (const k of ['namespace', 'labelSelector', 'index', 'value', 'cluster']) {
      if (sub.query[k]) msg[k] = sub.query[k];
    }
    if (sub.position) msg.resourceVersion = sub.position;
    else msg.snapshot = sub.query.snapshot !== false; // false: changes from now on
    sub.handler.begin?.({mode: sub.mode});
    this.write(msg);
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      this.dispatchEvent(new CustomEvent('protocol-error', {detail: {message: 'a stream message is not JSON'}}));
      return;
    }
    const sub = this.byWire.get(msg.id);
    if (!sub) {
      // Not ours (any more): an unsubscribed attempt, or a connection-level
      // error that names no subscription.
      if (!msg.id && msg.type === 'ERROR') {
        this.dispatchEvent(new CustomEvent('protocol-error', {detail: {message: msg.message}}));
      }
      return;
    }
    this.dispatch(sub, msg);
  }

  dispatchWindow(sub, msg) {
    switch (msg.type) {
      case 'WINDOW':
        sub.resume = msg.resume ?? '';
        sub.handler.window?.(msg);
        break;
      case 'WINDOW_CHANGES':
        try {
          sub.handler.changes?.(msg);
          sub.resume = msg.resume ?? '';
        } catch (err) {
          // Out of step: ask for the whole window again.
          this.dispatchEvent(new CustomEvent('protocol-error', {detail: {message: `window: ${err.message}; reloading it`}}));
          sub.resume = '';
          this.send(sub);
        }
        break;
      case 'RESYNC_REQUIRED':
        sub.resume = '';
        sub.handler.resync?.(msg.reason || 'the server asked for a resync');
        if (!sub.closed) this.send(sub);
        break;
      case 'ERROR':
      case 'UNSUBSCRIBED':
        this.byWire.delete(sub.wireId);
        sub.wireId = '';
        sub.handler.error?.(msg.message || 'the server ended the window', msg.code);
        break;
    }
  }

  dispatch(sub, msg) {
    if (sub.kind === 'window') {
      this.dispatchWindow(sub, msg);
      return;
    }
    // Snapshot items carry their object's version, which is not a stream
    // position; replayed and live events are positions.
    // Across clusters every message after a cluster's snapshot carries the
    // stream's resume token, the position to resume from.
    const snapshot = sub.mode === 'snapshot' && !sub.synced;
    if (msg.resume) sub.position = msg.resume;
    const across = msg.resume || msg.cluster;
    switch (msg.type) {
      case 'ADDED':
      case 'MODIFIED':
      case 'DELETED':
        if (!snapshot && !across && msg.resourceVersion) sub.position = msg.resourceVersion;
        if (!sub.synced && sub.mode === 'resume') sub.replayed++;
        sub.handler.event?.(msg, {snapshot});
        break;
      case 'SYNCED':
        sub.synced = true;
        if (!across && msg.resourceVersion) sub.position = msg.resourceVersion;
        sub.handler.synced?.({mode: sub.mode, resourceVersion: msg.resourceVersion, replayed: sub.replayed});
        break;
      case 'BOOKMARK':
        if (!snapshot && !across && msg.resourceVersion) sub.position = msg.resourceVersion;
        sub.handler.bookmark?.(msg.resourceVersion);
        break;
      case 'CLUSTER':
        sub.handler.cluster?.(msg);
        break;
      case 'RESYNC_REQUIRED':
        if (msg.cluster) {
          // One cluster restarts alone; its snapshot follows in this stream.
          sub.handler.resync?.(msg.reason || `cluster ${msg.cluster} asked for a resync`);
          break;
        }
        this.byWire.delete(sub.wireId);
        sub.wireId = '';
        sub.position = '';
        sub.handler.resync?.(msg.reason || 'the server asked for a resync');
        if (!sub.closed) this.send(sub);
        break;
      case 'ERROR':
        this.byWire.delete(sub.wireId);
        sub.wireId = '';
        sub.handler.error?.(msg.message || 'the server refused the subscription', msg.code);
        break;
    }
  }
}

// streamURL is the multiplexed stream's address on this page's origin,
// under base ('' or a cluster's /clusters/{name}).
export function streamURL(base = '', loc = window.location) {
  return `${loc.protocol === 'https:' ? 'wss' : 'ws'}://${loc.host}${base}/api/v1/stream`;
}
