// DetailPanel shows one object: a summary, its JSON and its recent changes
// as diffs. It follows the object live while its view's store holds it, and
// says so when the object is deleted. Escape (handled by the app) or the
// close button closes it and gives focus back to where it came from.

import {h, ago, clock} from './dom.js';
import {preview} from './diff.js';
import {renderJSON} from './json.js';
import {podIPs} from './columns.js';

export class DetailPanel {
  constructor(el) {
    this.el = el;
    this.tab = 'json';
    this.current = null; // {resource, key, store, obj, note, returnFocus}
    this.shownRV = null;

    this.kind = h('p', {class: 'detail-kind'});
    this.title = h('h2', {id: 'detail-title', class: 'detail-title'});
    this.sub = h('p', {id: 'detail-sub', class: 'detail-sub'});
    this.closeBtn = h('button', {type: 'button', class: 'icon-btn', 'aria-label': 'Close detail (Escape)', title: 'Close (Escape)',
      onclick: () => this.close()}, '×');
    this.state = h('p', {class: 'detail-state', role: 'status', hidden: true});
    this.facts = h('dl', {class: 'facts'});
    this.tabJSON = h('button', {type: 'button', role: 'tab', id: 'tab-json', 'aria-controls': 'panel-json', class: 'tab'}, 'JSON');
    this.changeCount = h('span', {class: 'pill'}, '0');
    this.tabChanges = h('button', {type: 'button', role: 'tab', id: 'tab-changes', 'aria-controls': 'panel-changes', class: 'tab'},
      'Changes ', this.changeCount);
    this.json = h('pre', {class: 'json', tabindex: 0, 'aria-label': 'Object JSON'});
    this.copyBtn = h('button', {type: 'button', class: 'small', onclick: () => this.copy()}, 'Copy JSON');
    this.changes = h('ol', {class: 'changes', 'aria-label': 'Recent changes, newest first'});
    this.panelJSON = h('section', {role: 'tabpanel', id: 'panel-json', 'aria-labelledby': 'tab-json', class: 'tabpanel'},
      h('div', {class: 'panel-tools'}, this.copyBtn), this.json);
    this.panelChanges = h('section', {role: 'tabpanel', id: 'panel-changes', 'aria-labelledby': 'tab-changes', class: 'tabpanel', tabindex: 0},
      this.changes);

    const tablist = h('div', {role: 'tablist', 'aria-label': 'Object views', class: 'tabs'}, this.tabJSON, this.tabChanges);
    tablist.addEventListener('keydown', (e) => {
      if (e.key === 'ArrowLeft' || e.key === 'ArrowRight' || e.key === 'Home' || e.key === 'End') {
        e.preventDefault();
        this.select(this.tab === 'json' ? 'changes' : 'json', true);
      }
    });
    this.tabJSON.addEventListener('click', () => this.select('json'));
    this.tabChanges.addEventListener('click', () => this.select('changes'));

    el.replaceChildren(
      h('header', {class: 'detail-head'}, h('div', {class: 'detail-names'}, this.kind, this.title, this.sub), this.closeBtn),
      this.state, this.facts, tablist, this.panelJSON, this.panelChanges);
    el.tabIndex = -1;
    el.setAttribute('aria-labelledby', 'detail-title');
    el.setAttribute('aria-describedby', 'detail-sub');
    this.select('json');
  }

  get isOpen() {
    return !this.el.hidden;
  }

  // open shows an object: from a store (followed live) or a fixed object
  // (with a note saying where it came from).
  open({resource, key, store = null, obj = null, note = '', returnFocus = null}) {
    if (this.unlisten) this.unlisten();
    this.unlisten = store?.onChange((k) => {
      if (k === key || k === '') this.refresh();
    });
    this.current = {resource, key, store, obj, note, returnFocus};
    this.shownRV = null;
    this.el.hidden = false;
    document.body.classList.add('detail-open');
    this.refresh();
    // Focus goes to the dialog itself, not its close button: the key that
    // opened it must not also activate a control inside it.
    this.el.focus();
  }

  close() {
    if (!this.isOpen) return;
    this.unlisten?.();
    this.unlisten = null;
    this.el.hidden = true;
    document.body.classList.remove('detail-open');
    const back = this.current?.returnFocus;
    this.current = null;
    back?.();
  }

  select(tab, focus = false) {
    this.tab = tab;
    for (const [name, btn, panel] of [['json', this.tabJSON, this.panelJSON], ['changes', this.tabChanges, this.panelChanges]]) {
      const on = name === tab;
      btn.setAttribute('aria-selected', String(on));
      btn.tabIndex = on ? 0 : -1;
      panel.hidden = !on;
      if (on && focus) btn.focus();
    }
  }

  refresh() {
    const cur = this.current;
    if (!cur) return;
    const found = cur.store?.object(cur.key);
    const obj = found?.obj ?? cur.obj;
    if (!obj) return;
    const m = obj.metadata ?? {};
    this.kind.textContent = `${obj.kind ?? cur.resource.kind}${cur.resource.group ? ` · ${cur.resource.group}` : ''}`;
    this.title.textContent = cur.key;
    this.sub.textContent = `resourceVersion ${m.resourceVersion ?? '?'} · created ${ago(m.creationTimestamp)} · uid ${m.uid ?? '?'}`;
    const stateText = found?.deleted ? 'This object has been deleted. Its last known state is shown.'
      : cur.note || '';
    this.state.textContent = stateText;
    this.state.hidden = !stateText;
    this.state.dataset.tone = found?.deleted ? 'bad' : 'info';
    this.el.dataset.deleted = String(!!found?.deleted);
    this.renderFacts(obj);
    if (this.shownRV !== m.resourceVersion) {
      this.shownRV = m.resourceVersion;
      const scroll = this.json.scrollTop;
      this.json.replaceChildren(renderJSON(obj));
      this.json.scrollTop = scroll;
    }
    this.renderChanges(cur.store?.changesOf(cur.key) ?? []);
  }

  renderFacts(obj) {
    const facts = [];
    const m = obj.metadata ?? {};
    if (obj.kind === 'Pod') {
      const ips = podIPs(obj);
      facts.push(['Phase', obj.status?.phase ?? ''], ['Node', obj.spec?.nodeName ?? '—'],
        ['IPs', ips.length ? ips.join(', ') : '—'],
        ['Network', obj.spec?.hostNetwork ? 'hostNetwork (shares the node\'s address)' : 'pod network']);
    }
    const owners = (m.ownerReferences ?? []).map((o) => `${o.kind}/${o.name}`).join(', ');
    if (owners) facts.push(['Owner', owners]);
    const labels = Object.entries(m.labels ?? {});
    this.facts.replaceChildren(
      ...facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
      h('dt', {}, 'Labels'),
      h('dd', {class: 'chips'}, labels.length ? labels.map(([k, v]) => h('span', {class: 'chip'}, `${k}=${v}`)) : '—'));
  }

  renderChanges(list) {
    this.changeCount.textContent = String(list.length);
    if (list.length === 0) {
      this.changes.replaceChildren(h('li', {class: 'muted'},
        'No changes since this page started watching. Modifications appear here live, as diffs.'));
      return;
    }
    this.changes.replaceChildren(...list.slice().reverse().map((c) => {
      const lines = (c.changes ?? []).flatMap((d) => [
        d.before !== undefined ? h('span', {class: 'del'}, `- ${d.path}: ${preview(d.before)}`) : null,
        d.after !== undefined ? h('span', {class: 'add'}, `+ ${d.path}: ${preview(d.after)}`) : null,
      ].filter(Boolean));
      const what = {ADDED: 'Created', MODIFIED: 'Modified', DELETED: 'Deleted'}[c.type];
      const detail = [c.rv ? `rv ${c.rv}` : '', clock(c.at), c.resync ? 'found on resync' : '',
        c.type === 'MODIFIED' ? `${c.changes?.length ?? 0} field${c.changes?.length === 1 ? '' : 's'}` : '']
        .filter(Boolean).join(' · ');
      return h('li', {class: 'change', dataset: {type: c.type.toLowerCase()}},
        h('p', {class: 'change-head'}, h('span', {class: `badge badge-${c.type.toLowerCase()}`}, what), ' ', detail),
        lines.length ? h('pre', {class: 'diff'}, lines) : null);
    }));
  }

  async copy() {
    const cur = this.current;
    const obj = cur?.store?.object(cur.key)?.obj ?? cur?.obj;
    try {
      await navigator.clipboard.writeText(JSON.stringify(obj, null, 2));
      this.copyBtn.textContent = 'Copied';
    } catch {
      this.copyBtn.textContent = 'Copy failed';
    }
    setTimeout(() => { this.copyBtn.textContent = 'Copy JSON'; }, 1500);
  }
}
