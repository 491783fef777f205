// The kubeindex dashboard: resources with their freshness (polled from
// /api/v1/resources), a table of the chosen resource, object detail, and
// the IP lookup. The location hash holds the view, e.g.
// #/pods?namespace=media&filter=status%21%3DRunning&sort=-restarts, so a
// view can be reloaded, bookmarked and shared.
//
// A kubeindex serving several clusters (its root answers /api/v1/resources
// 404) gets a cluster picker (clusters.js): the hash then starts with the
// cluster, #/clusters/east/pods, and every request, stream, search and IP
// lookup of the page goes under that cluster's prefix; #/clusters/*/pods
// is the view across every cluster (FleetView, fleet.js).
//
// A resource of at most ASK_ABOVE objects, asked no question, is
// downloaded and kept live whole (ResourceView: sorted and searched in the
// page). A larger one, or any view with a filter or a sort, asks the
// server (AskView: a live window of rows, sorted, filtered and counted by
// the server).

import {counted, clock, ago, typing, h} from './dom.js';
import {api, clusterBase, credentials, fleet, inCluster, place, wsProtocols} from './api.js';
import {StreamClient, streamURL} from './stream.js';
import {VirtualTable} from './table.js';
import {ResourceView, describe} from './view.js';
import {AskView} from './ask.js';
import {DetailPanel} from './detail.js';
import {IPLookup} from './iplookup.js';
import {Search} from './search.js';
import {ResourceNav} from './nav.js';
import {ClusterPicker, ALL, renderSlots, union} from './clusters.js';
import {FleetView} from './fleet.js';

const POLL_MS = 2000;
const ASK_ABOVE = 5000;
const FILTERS = ['namespace', 'labelSelector', 'index', 'value'];
const $ = (id) => document.getElementById(id);

const ui = {
  conn: $('conn'),
  simulated: $('simulated-badge'),
  apiStatus: $('api-status'),
  banner: $('stale-banner'),
  title: $('view-title'),
  count: $('view-count'),
  form: $('filters'),
  namespace: $('f-namespace'),
  selector: $('f-selector'),
  index: $('f-index'),
  value: $('f-value'),
  clear: $('f-clear'),
  namespaces: $('namespaces'),
  indexValues: $('index-values'),
  quick: $('quick'),
  streamStatus: $('stream-status'),
  notice: $('notice'),
  noticeText: $('notice-text'),
  ipInput: $('ip-input'),
  askForm: $('ask-form'),
  askInput: $('ask-input'),
  askChips: $('ask-chips'),
  askError: $('ask-error'),
  counts: $('counts'),
  slots: $('cluster-slots'),
};

const app = {
  resources: [],
  byName: new Map(),
  simulated: false,
  reachable: true,
  view: null,
  viewKey: '',
  liveCount: null, // {name, total} of the current view, when unfiltered
  // fleet: null for a single cluster; else {clusters: GET /api/v1/clusters's}.
  fleet: null,
  cluster: '', // the cluster whose resources are loaded: a name, ALL or '' (single)
  clusterError: '', // why that cluster's resources could not be read
};

const nav = new ResourceNav($('resource-list'), (name) => hashFor(name, {}));
const picker = new ClusterPicker($('clusters'), $('cluster-list'));
const stream = new StreamClient(streamURL(), () => wsProtocols());
const table = new VirtualTable($('table-region'), {
  label: 'Objects',
  onOpen: (row) => openRow(row.key),
  onSort: (id) => app.view?.setSort(id),
});
const detail = new DetailPanel($('detail'));
const ip = new IPLookup($('ip-form'), ui.ipInput, $('ip-result'), {onOpen: openFromLookup});
const find = new Search($('find-form'), $('find-input'), $('find-result'), {onOpen: openFromSearch});

// Routing.

function parseHash() {
  const m = /^#\/(?:clusters\/([^/?]+)\/)?([^?]*)(?:\?(.*))?$/.exec(window.location.hash);
  const params = new URLSearchParams(m?.[3] ?? '');
  const filters = {};
  for (const k of FILTERS) if (params.get(k)) filters[k] = params.get(k);
  const ask = {filter: params.getAll('filter').filter(Boolean), sort: params.get('sort') ?? ''};
  return {cluster: m?.[1] ? decodeURIComponent(m[1]) : '', resource: m ? decodeURIComponent(m[2]) : '', filters, ask};
}

// hashFor is the hash of a view; cluster is the route's current one
// unless given ('' for a single cluster).
function hashFor(resource, filters, ask = {}, cluster = parseHash().cluster) {
  const q = new URLSearchParams();
  for (const k of FILTERS) if (filters[k]) q.set(k, filters[k]);
  for (const f of ask.filter ?? []) q.append('filter', f);
  if (ask.sort) q.set('sort', ask.sort);
  const s = q.toString();
  const at = cluster ? `clusters/${cluster === ALL ? ALL : encodeURIComponent(cluster)}/` : '';
  return `#/${at}${encodeURIComponent(resource)}${s ? `?${s}` : ''}`;
}

function applyRoute() {
  const route = parseHash();
  if (app.fleet && route.cluster !== app.cluster) {
    switchCluster(route);
    return;
  }
  if (!app.fleet && route.cluster) {
    // A single cluster has no picker: its link is the plain one.
    window.location.replace(hashFor(route.resource, route.filters, route.ask, ''));
    return;
  }
  if (app.resources.length === 0) return;
  const {resource, filters, ask} = route;
  const res = app.byName.get(resource);
  if (!res) {
    const fallback = app.byName.get('pods') ?? app.resources[0];
    window.location.replace(hashFor(fallback.name, {}));
    return;
  }
  const key = hashFor(res.name, filters, ask);
  if (key === app.viewKey) return;
  app.viewKey = key;
  detail.close();
  app.view?.destroy();
  app.liveCount = null;
  hideNotice();
  fillFilterForm(res, filters);
  renderChips(ask.filter);
  ui.title.textContent = res.name;
  const across = app.cluster === ALL;
  const asking = across || ask.filter.length > 0 || !!ask.sort || res.count > ASK_ABOVE;
  ui.quick.closest('.search').hidden = asking;
  ui.counts.hidden = true;
  ui.counts.replaceChildren();
  ui.slots.hidden = true;
  ui.slots.replaceChildren();
  const View = across ? FleetView : asking ? AskView : ResourceView;
  app.view = new View({
    resource: res, filters, ask, stream, table,
    onSlots: (slots) => renderSlots(ui.slots, slots),
    onClusters: () => poll(),
    onAsk: (next) => {
      const key = hashFor(res.name, filters, {...parseHash().ask, ...next});
      // Another sort of the same rows: the view asks again at once,
      // keeping its counts, and the hash change finds it done.
      if (app.view?.reask?.({...parseHash().ask, ...next})) app.viewKey = key;
      window.location.hash = key;
    },
    onCounts: (counts) => renderCounts(counts),
    onState: ({phase, text}) => {
      ui.streamStatus.dataset.state = phase;
      ui.streamStatus.textContent = text;
    },
    onNotice: showNotice,
    onRows: ({total, shown}) => {
      // An unfiltered live table knows the count before the next poll does.
      if (!describe(filters) && app.liveCount?.total !== total) {
        app.liveCount = {name: res.name, total};
        renderResources();
      }
      const singular = res.singular || res.kind.toLowerCase();
      ui.count.dataset.count = String(total);
      ui.count.dataset.shown = String(shown);
      ui.count.textContent = counted(total, singular, res.name) + (across ? ' in all clusters' : '') +
        (describe(filters) ? ` matching ${describe(filters)}` : '') + (shown !== total ? ` · ${shown} shown` : '');
    },
  });
  app.view.setQuick(ui.quick.value);
  renderResources();
}

// Filters.

function fillFilterForm(res, filters) {
  ui.namespace.value = filters.namespace ?? '';
  ui.namespace.disabled = !res.namespaced;
  ui.namespace.placeholder = res.namespaced ? 'all namespaces' : 'cluster-scoped';
  ui.selector.value = filters.labelSelector ?? '';
  ui.index.replaceChildren(new Option('none', ''),
    ...res.indexes.map((ix) => new Option(`${ix.name} (${ix.type}${ix.label ? `: ${ix.label}` : ''}${ix.path ? `: ${ix.path}` : ''})`, ix.name)));
  ui.index.value = filters.index ?? '';
  ui.index.disabled = res.indexes.length === 0;
  ui.value.value = filters.value ?? '';
  ui.value.disabled = !filters.index;
  loadIndexValues(res.name, filters.index);
  loadNamespaces();
}

async function loadIndexValues(resource, index) {
  ui.indexValues.replaceChildren();
  if (!index) return;
  try {
    const body = await api.indexValues(resource, index, 500);
    ui.indexValues.replaceChildren(...body.values.map((v) => new Option(`${v.count} object${v.count === 1 ? '' : 's'}`, v.value)));
  } catch {
    // Suggestions are a convenience; the filter works without them.
  }
}

async function loadNamespaces() {
  if (!app.byName.has('namespaces') || ui.namespaces.childElementCount > 0) return;
  try {
    const body = await api.list('namespaces', {limit: 1000});
    const names = new Set(body.items.map((o) => (o.object ?? o).metadata.name)); // a fleet's items: {cluster, object}
    ui.namespaces.replaceChildren(...[...names].map((n) => new Option('', n)));
  } catch {
    // As above: only suggestions.
  }
}

ui.index.addEventListener('change', () => {
  ui.value.disabled = !ui.index.value;
  if (!ui.index.value) ui.value.value = '';
  loadIndexValues(parseHash().resource, ui.index.value);
});

ui.form.addEventListener('submit', (e) => {
  e.preventDefault();
  ui.value.setCustomValidity(ui.index.value && !ui.value.value.trim() ? 'Give the index value to look up.' : '');
  if (!ui.form.reportValidity()) return;
  const filters = {
    namespace: ui.namespace.disabled ? '' : ui.namespace.value.trim(),
    labelSelector: ui.selector.value.trim(),
    index: ui.index.value,
    value: ui.index.value ? ui.value.value.trim() : '',
  };
  window.location.hash = hashFor(parseHash().resource, filters, parseHash().ask);
});
ui.value.addEventListener('input', () => ui.value.setCustomValidity(''));
ui.clear.addEventListener('click', () => {
  window.location.hash = hashFor(parseHash().resource, {});
});
ui.quick.addEventListener('input', () => app.view?.setQuick(ui.quick.value));

// Questions: filter chips (one filter= each, ANDed) and counts.

function renderChips(filters) {
  ui.askError.textContent = '';
  ui.askChips.replaceChildren(...filters.map((f, i) => h('li', {class: 'ask-chip'},
    h('span', {}, f),
    h('button', {type: 'button', 'aria-label': `Remove filter ${f}`, title: 'Remove this filter',
      onclick: () => setAsk({filter: filters.filter((_, j) => j !== i)})}, '×'))));
}

function setAsk(next) {
  const {resource, filters, ask} = parseHash();
  window.location.hash = hashFor(resource, filters, {...ask, ...next});
}

// addFilter asks the server before adding a chip: a filter it refuses
// shows the server's message (which says where the error is) and is not
// added.
async function addFilter(expr) {
  const {resource, filters, ask} = parseHash();
  const filter = [...ask.filter, expr];
  try {
    await api.counts(resource, {namespace: filters.namespace, labelSelector: filters.labelSelector,
      index: filters.index, value: filters.value, filter});
  } catch (err) {
    ui.askError.textContent = err.code === 400 ? err.message : `The server could not check the filter: ${err.message}`;
    ui.askInput.setAttribute('aria-invalid', 'true');
    return;
  }
  ui.askInput.value = '';
  ui.askInput.removeAttribute('aria-invalid');
  setAsk({filter});
}

ui.askForm.addEventListener('submit', (e) => {
  e.preventDefault();
  const expr = ui.askInput.value.trim();
  if (expr) addFilter(expr);
});
ui.askInput.addEventListener('input', () => {
  ui.askError.textContent = '';
  ui.askInput.removeAttribute('aria-invalid');
});

const COUNTS_SHOWN = 12;

// renderCounts shows the counts route's groups summed per key: per status
// and per node for pods. A count is a button that adds its filter.
function renderCounts(counts) {
  const keys = counts?.groupBy ?? [];
  if (keys.length === 0) {
    ui.counts.hidden = true;
    return;
  }
  const titles = {status: 'Status', node: 'Nodes', namespace: 'Namespaces', cluster: 'Clusters'};
  const sections = keys.map((key, k) => {
    const sums = new Map();
    for (const g of counts.groups ?? []) sums.set(g.values[k], (sums.get(g.values[k]) ?? 0) + g.count);
    const top = [...sums].sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0])));
    const buttons = top.slice(0, COUNTS_SHOWN).map(([v, n]) => v === null
      ? h('span', {class: 'more'}, `none ${n.toLocaleString('en-US')}`)
      : h('button', {type: 'button', class: 'small', title: `Add the filter ${key}=${v}`, dataset: {key, value: String(v), count: String(n)},
        onclick: () => addFilter(`${key}=${JSON.stringify(String(v))}`)}, `${v} ${n.toLocaleString('en-US')}`));
    const more = top.length > COUNTS_SHOWN ? h('span', {class: 'more'}, `and ${top.length - COUNTS_SHOWN} more`) : null;
    return [h('h2', {}, titles[key] ?? key), buttons, more];
  });
  ui.counts.replaceChildren(...sections.flat(2).filter(Boolean));
  ui.counts.dataset.total = String(counts.total ?? '');
  ui.counts.hidden = false;
}

// Freshness.

// poll runs one reading at a time: asked while one is under way (a
// cluster picked meanwhile), it reads again as soon as that one ends.
async function poll() {
  if (app.polling) {
    app.pollAgain = true;
    return;
  }
  app.polling = true;
  app.pollAgain = false;
  clearTimeout(app.pollTimer);
  try {
    if (app.fleet) {
      await pollFleet();
    } else {
      const body = await api.resources();
      signedIn();
      app.reachable = true;
      app.simulated = !!body.simulated;
      setResources(body.resources);
      applyRoute();
    }
  } catch (err) {
    if (err.code === 401) signIn(err.message);
    else if (err.code === 404 && !app.fleet) {
      // A fleet's root serves no cluster's resources: ask for its clusters.
      app.fleet = {clusters: []};
      app.pollAgain = true;
    } else {
      app.reachable = false;
      app.unreachableReason = err.message;
    }
  }
  app.polling = false;
  renderResources();
  clearTimeout(app.pollTimer);
  app.pollTimer = setTimeout(poll, app.pollAgain ? 0 : POLL_MS);
}

function setResources(resources) {
  app.resources = resources;
  app.byName = new Map(resources.map((r) => [r.name, r]));
}

// Clusters, when kubeindex serves several.

// pollFleet reads the clusters, then the resources of the cluster shown:
// its own, or for all clusters each serving cluster's, added up.
async function pollFleet() {
  const body = await fleet.clusters();
  signedIn();
  app.reachable = true;
  app.fleet.clusters = body.clusters ?? [];
  const cluster = app.cluster;
  if (!cluster) {
    switchCluster(parseHash());
    return;
  }
  let resources = [];
  let error = '';
  if (cluster === ALL) {
    const serving = app.fleet.clusters.filter((c) => c.state !== 'failed');
    const answers = await Promise.allSettled(serving.map((c) => inCluster(c.name).resources()));
    resources = union(answers.filter((a) => a.status === 'fulfilled').map((a) => a.value.resources));
    app.simulated = app.fleet.clusters.some((c) => c.simulated);
  } else {
    try {
      const own = await api.resources();
      resources = own.resources;
      app.simulated = !!own.simulated;
    } catch (err) {
      if (!err.code || err.code === 401) throw err;
      error = err.message; // the cluster is not serving: say why
    }
  }
  if (cluster !== app.cluster) return; // switched meanwhile
  app.clusterError = error;
  setResources(resources);
  applyRoute();
}

// switchCluster points the whole page at the route's cluster: requests,
// the stream, search and IP lookup; for all clusters the page's stream is
// the root's, where the FleetView follows one stream across clusters.
function switchCluster(route) {
  const known = app.fleet.clusters;
  if (known.length === 0) return; // pollFleet calls again once they are read
  if (route.cluster !== ALL && !known.some((c) => c.name === route.cluster)) {
    const keep = !route.cluster; // a plain link keeps its filters; an unknown cluster's are not for the others
    window.location.replace(hashFor(route.resource, keep ? route.filters : {}, keep ? route.ask : {}, ALL));
    return;
  }
  forgetView();
  app.cluster = route.cluster;
  app.clusterError = '';
  app.liveCount = null;
  setResources([]);
  ui.namespaces.replaceChildren();
  ui.indexValues.replaceChildren();
  ui.title.textContent = 'Loading…';
  ui.count.textContent = '';
  ui.counts.hidden = true;
  ui.slots.hidden = true;
  ui.streamStatus.dataset.state = 'loading';
  ui.streamStatus.textContent = '';
  const across = route.cluster === ALL;
  place.base = across ? '' : clusterBase(route.cluster);
  stream.setURL(streamURL(place.base));
  // Search is a cluster's: across clusters it waits for one to be
  // picked. The IP lookup asks every cluster there.
  ip.across = across;
  $('find-input').disabled = across;
  $('find-input').placeholder = across ? 'pick a cluster first' : 'name, label value or IP';
  renderResources();
  poll();
}

// pickerHref is the hash that opens a cluster with the resource and
// selection shown (a filter or a sort may name a key another cluster
// lacks, so they stay behind).
function pickerHref(name) {
  const {resource, filters} = parseHash();
  const keep = {namespace: filters.namespace, labelSelector: filters.labelSelector};
  return hashFor(resource || 'pods', keep, {}, name);
}

// Sign-in, when the server requires a bearer token.

function signIn(message) {
  const first = !document.body.classList.contains('signed-out');
  if (first) forgetView();
  document.body.classList.add('signed-out');
  $('signin').hidden = false;
  $('signout').hidden = true;
  if (credentials.token) {
    // A refused token is forgotten at once; the message stays until the
    // next attempt.
    $('signin-error').textContent = `The token was refused. ${message}`;
    credentials.token = '';
  }
  if (first) $('token-input').focus();
}

function signedIn() {
  if (!document.body.classList.contains('signed-out')) {
    $('signout').hidden = !credentials.token;
    return;
  }
  document.body.classList.remove('signed-out');
  $('signin').hidden = true;
  $('signout').hidden = !credentials.token;
  stream.restart();
}

$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  credentials.token = $('token-input').value.trim();
  $('token-input').value = '';
  $('signin-error').textContent = '';
  poll();
});

// forgetView drops what the current view holds: after a sign-out nothing
// read with the old token stays on the page.
function forgetView() {
  detail.close();
  ip.close();
  find.close();
  app.view?.destroy();
  app.view = null;
  app.viewKey = '';
  table.setRows([]);
}

$('signout').addEventListener('click', () => {
  credentials.token = '';
  forgetView();
  stream.restart();
  poll();
});

function renderResources() {
  const current = parseHash().resource;
  const live = app.view?.phase === 'live' ? app.liveCount : null;
  nav.update(app.resources.map((r) => (r.name === live?.name ? {...r, count: live.total} : r)), current);
  if (app.fleet?.clusters.length) picker.update(app.fleet.clusters, app.cluster, pickerHref);
  ui.simulated.hidden = !app.simulated;
  const where = app.fleet ? ` · ${app.cluster === ALL ? 'all clusters' : app.cluster}` : '';
  document.title = `${current || 'kubeindex'}${where} · kubeindex${app.simulated ? ' (simulated)' : ''}`;
  ui.apiStatus.textContent = app.reachable ? '' : `kubeindex is not answering (${app.unreachableReason}).`;
  renderBanner(app.byName.get(current));
}

function renderBanner(st) {
  let text = '';
  let tone = 'bad';
  if (!app.reachable) {
    text = 'kubeindex is not answering. Everything shown is the last state received and may be out of date.';
  } else if (app.clusterError) {
    text = `Cluster ${app.cluster} is not serving: ${app.clusterError}`;
  } else if (app.cluster === ALL) {
    // Each cluster's freshness is in its slot of the answer.
  } else if (st && !st.synced) {
    text = `STALE: ${st.name} has not synced yet${st.lastError ? ` (${st.lastError})` : ''}.`;
  } else if (st?.stale) {
    text = `STALE: the watch on ${st.name} has been down since ${clock(st.disconnectedSince)}` +
      `${st.lastError ? ` (${st.lastError})` : ''}. kubeindex answers from its cache as of resourceVersion ` +
      `${st.resourceVersion}, which may be out of date.`;
  } else if (st && !st.watchConnected) {
    tone = 'warn';
    text = `The watch on ${st.name} dropped ${ago(st.disconnectedSince)}; kubeindex is reconnecting.`;
  }
  ui.banner.hidden = !text;
  ui.banner.textContent = text;
  ui.banner.dataset.tone = tone;
}

// Connection state and notices.

stream.addEventListener('state', (e) => {
  const {state, delay} = e.detail;
  ui.conn.dataset.state = state;
  ui.conn.textContent = {
    open: 'Live',
    connecting: 'Connecting…',
    reconnecting: `Reconnecting in ${Math.ceil((delay ?? 0) / 1000)}s`,
    stopped: 'Streams per cluster',
  }[state] ?? state;
});
stream.addEventListener('protocol-error', (e) => showNotice(`Stream error: ${e.detail.message}`, 'bad'));

function showNotice(text, tone) {
  ui.noticeText.textContent = text;
  ui.notice.dataset.tone = tone;
  ui.notice.hidden = false;
}

function hideNotice() {
  ui.notice.hidden = true;
}
$('notice-close').addEventListener('click', hideNotice);

// Detail.

function openRow(key) {
  const view = app.view;
  const returnFocus = () => table.focusKey(key) || ui.quick.focus();
  if (view.store) {
    detail.open({resource: view.resource, key, store: view.store, returnFocus});
    return;
  }
  // A question view holds projections: fetch the whole object (of its
  // own cluster, across clusters).
  (view.read ? view.read(key) : api.get(view.resource.name, key)).then((obj) => detail.open({
    resource: view.resource, key, obj: {kind: view.resource.kind, ...obj}, returnFocus,
    note: `As read at ${clock(Date.now())} (resourceVersion ${obj.metadata?.resourceVersion ?? '?'}); not followed live.`,
  }), (err) => showNotice(`Could not read ${key}: ${err.message}`, 'bad'));
}

// openFromLookup opens an owner an IP lookup found: from the live table
// when it is the current view's, else as the lookup returned it.
function openFromLookup(plural, key, obj, res, button, cluster = '') {
  const view = app.view;
  const live = !cluster && view?.store && view.resource.plural === plural && !view.resource.group && view.store.rows.has(key);
  const kinds = {pods: 'Pod', services: 'Service', nodes: 'Node'};
  const resource = app.byName.get(plural) ?? {kind: kinds[plural], group: ''};
  detail.open({
    resource: live ? view.resource : resource, key, store: live ? view.store : null, obj,
    note: live ? '' : `As the IP lookup returned it${cluster ? ` in cluster ${cluster}` : ''} (resourceVersion ${res.metadata?.resourceVersion ?? '?'}); not followed live.`,
    returnFocus: () => (button.isConnected ? button.focus() : ui.ipInput.focus()),
  });
}

// openFromSearch opens an object a search found: read whole from the
// server (a result carries only its metadata).
function openFromSearch(name, key, meta, button) {
  const resource = app.byName.get(name) ?? {name, kind: meta?.kind ?? name, group: ''};
  const returnFocus = () => (button.isConnected ? button.focus() : $('find-input').focus());
  api.get(name, key).then((obj) => detail.open({
    resource, key, obj: {kind: resource.kind, ...obj}, returnFocus,
    note: `As read at ${clock(Date.now())} (resourceVersion ${obj.metadata?.resourceVersion ?? '?'}); not followed live.`,
  }), (err) => showNotice(`Could not read ${name} ${key}: ${err.message}`, 'bad'));
}

// Keyboard: Escape closes the detail panel, then the search or IP result;
// "/" jumps to the row search.
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape') {
    if (detail.isOpen) {
      e.preventDefault();
      detail.close();
    } else if (find.isOpen) {
      e.preventDefault();
      find.close();
      $('find-input').focus();
    } else if (ip.isOpen) {
      e.preventDefault();
      ip.close();
      ui.ipInput.focus();
    }
  } else if (e.key === '/' && !typing(e.target) && !e.ctrlKey && !e.metaKey) {
    e.preventDefault();
    (ui.quick.closest('.search').hidden ? ui.askInput : ui.quick).focus();
  }
});

// The skip link lands on the table's current row rather than its frame.
document.querySelector('.skip-link').addEventListener('click', (e) => {
  if (table.rows.length === 0) return;
  e.preventDefault();
  table.focusIndex(Math.max(0, table.indexOf(table.activeKey)));
});

// The page as a cluster serves it, /clusters/{name}/, is that cluster's
// view at the root, where the fleet's own routes are.
const served = /^\/clusters\/([^/]+)\/$/.exec(window.location.pathname);
if (served) {
  const hash = /^#\/clusters\//.test(window.location.hash) ? '' : window.location.hash.replace(/^#\/?/, '');
  window.location.replace(`/#/clusters/${served[1]}/${hash}`);
} else {
  window.addEventListener('hashchange', applyRoute);
  stream.start();
  poll();
}
