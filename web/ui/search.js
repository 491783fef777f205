// Search finds objects of every cached resource by name fragment, label
// value or address (GET /api/v1/search): exact matches before prefixes
// before substrings, as the server ranks them. Each result opens the
// object's detail.

import {h} from './dom.js';
import {api} from './api.js';

const LIMIT = 50;

export class Search {
  constructor(form, input, result, {onOpen}) {
    this.input = input;
    this.result = result;
    this.onOpen = onOpen;
    this.abort = null;
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      this.search(input.value.trim());
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

  async search(q) {
    if (!q) return;
    this.abort?.abort();
    const ctl = new AbortController();
    this.abort = ctl;
    this.show(q, [h('p', {class: 'muted'}, 'Searching…')], 'loading');
    try {
      const res = await api.search({q, limit: LIMIT}, {signal: ctl.signal});
      this.render(q, res);
    } catch (err) {
      if (ctl.signal.aborted) return;
      const msg = err.code === 404 ? 'This kubeindex cannot search across resources (no /api/v1/search).'
        : err.code === 400 ? `Bad input: ${err.message}` : err.code ? err.message : `kubeindex did not answer: ${err.message}`;
      this.show(q, [h('p', {class: 'ip-summary error', role: 'alert'}, msg)], 'error');
    }
  }

  render(q, res) {
    const items = res.items ?? [];
    const total = res.total ?? items.length;
    const summary = total === 0 ? `Nothing matches “${q}”.`
      : `${total.toLocaleString('en-US')} match${total === 1 ? '' : 'es'}${total > items.length ? `; the first ${items.length} shown` : ''}.`;
    const rows = items.map((it) => {
      const key = it.namespace ? `${it.namespace}/${it.name}` : it.name;
      const open = h('button', {type: 'button', class: 'link mono', onclick: () => this.onOpen(it.resource, key, it.object, open)}, key);
      const how = it.match === 'name' ? 'name' : `${it.match} ${it.key ? `${it.key}=` : ''}${it.value ?? ''}`;
      return h('tr', {dataset: {resource: it.resource, key, rank: it.rank ?? '', match: it.match ?? ''}},
        h('td', {}, it.resource), h('td', {}, open), h('td', {}, it.rank ?? ''), h('td', {class: 'mono'}, how));
    });
    const table = rows.length ? h('table', {class: 'ip-table'},
      h('thead', {}, h('tr', {}, ['Resource', 'Object', 'Rank', 'Matched'].map((t) => h('th', {scope: 'col'}, t)))),
      h('tbody', {}, rows)) : null;
    this.show(q, [h('p', {class: 'ip-summary'}, summary), table], total ? 'found' : 'none');
  }

  show(q, content, match) {
    this.result.dataset.match = match;
    this.result.dataset.query = q;
    this.result.hidden = false;
    this.result.replaceChildren(
      h('div', {class: 'ip-head'},
        h('h2', {}, 'Search: ', h('span', {class: 'mono'}, q)),
        h('button', {type: 'button', class: 'icon-btn', 'aria-label': 'Close search results', onclick: () => {
          this.close();
          this.input.focus();
        }}, '×')),
      ...content.filter(Boolean));
  }
}
