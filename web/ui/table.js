// VirtualTable renders a long list of rows as an ARIA grid, drawing only the
// rows in view (plus a margin), so 10,000 rows cost what 50 do. Rows are
// positioned absolutely inside a spacer as tall as all rows together, and a
// small pool of row elements is reused as the view scrolls.
//
// Keyboard: one row is in the tab order (roving tabindex); arrows, Page
// Up/Down, Home and End move between rows, Enter opens one. The grid keeps
// focus on the same object while rows are inserted or removed around it.
//
// Rows may be sparse: a view that holds only a window of the answer (see
// ask.js) leaves the other positions empty; they are drawn as placeholders,
// and onRange(start, end) says which rows are in view whenever that
// changes, so the view can move its window there.

import {h} from './dom.js';
import {FLASH_MS} from './store.js';

const OVERSCAN = 8;

export class VirtualTable {
  constructor(parent, {label, onOpen, onSort, rowHeight = 34}) {
    this.onOpen = onOpen;
    this.onSort = onSort;
    this.rowHeight = rowHeight;
    this.columns = [];
    this.sort = {id: '', desc: false};
    this.rows = [];
    this.pool = [];
    this.activeKey = '';
    this.frame = 0;
    this.onRange = null;
    this.range = '';

    this.headRow = h('div', {class: 'vt-row vt-header', role: 'row', 'aria-rowindex': 1});
    this.body = h('div', {class: 'vt-body', role: 'rowgroup'});
    this.viewport = h('div', {class: 'vt-viewport'}, this.body);
    this.empty = h('div', {class: 'vt-empty', hidden: true});
    this.el = h('div', {class: 'vt', role: 'grid', 'aria-label': label, 'aria-readonly': 'true'},
      h('div', {class: 'vt-head', role: 'rowgroup'}, this.headRow), this.viewport, this.empty);
    parent.replaceChildren(this.el);

    this.viewport.addEventListener('scroll', () => this.schedule(), {passive: true});
    this.body.addEventListener('keydown', (e) => this.keydown(e));
    this.body.addEventListener('click', (e) => {
      const row = e.target.closest('.vt-row');
      if (row) this.open(row.dataset.key);
    });
    this.body.addEventListener('focusin', (e) => {
      const row = e.target.closest('.vt-row');
      if (row) this.activeKey = row.dataset.key;
    });
    new ResizeObserver(() => this.schedule()).observe(this.viewport);
  }

  setLabel(label) {
    this.el.setAttribute('aria-label', label);
  }

  setColumns(columns, sort) {
    this.columns = columns;
    this.empty_ = null;
    this.sort = sort;
    this.el.style.setProperty('--vt-cols', columns.map((c) => c.width).join(' '));
    this.el.setAttribute('aria-colcount', columns.length);
    this.headRow.replaceChildren(...columns.map((c, i) => {
      const dir = sort.id === c.id ? (sort.desc ? 'descending' : 'ascending') : 'none';
      return h('div', {role: 'columnheader', class: `vt-cell${c.align === 'end' ? ' end' : ''}`,
        'aria-sort': dir, 'aria-colindex': i + 1},
      h('button', {type: 'button', class: 'vt-sort', onclick: () => this.onSort?.(c.id)},
        c.title, h('span', {class: 'vt-arrow', 'aria-hidden': 'true'}, dir === 'ascending' ? '▲' : dir === 'descending' ? '▼' : '')));
    }));
    for (const el of this.pool) el.remove();
    this.pool = [];
    this.schedule();
  }

  setRows(rows) {
    this.rows = rows;
    this.el.setAttribute('aria-rowcount', rows.length + 1);
    this.schedule();
  }

  setEmptyMessage(text) {
    this.empty.textContent = text;
  }

  schedule() {
    if (!this.frame) this.frame = requestAnimationFrame(() => this.render());
  }

  // render draws the rows in view. It is cheap enough to run every frame:
  // it writes to the DOM only what differs.
  // follow keeps focus on the object the focused row showed; focusIndex
  // turns it off, as it moves focus itself.
  render(follow = true) {
    cancelAnimationFrame(this.frame);
    this.frame = 0;
    const n = this.rows.length;
    const rh = this.rowHeight;
    this.body.style.height = `${n * rh}px`;
    this.empty.hidden = n > 0;
    const focused = follow && this.body.contains(document.activeElement) ? document.activeElement.dataset.key : null;

    const top = this.viewport.scrollTop;
    const height = this.viewport.clientHeight || 600;
    const start = Math.max(0, Math.floor(top / rh) - OVERSCAN);
    const end = Math.min(n, Math.ceil((top + height) / rh) + OVERSCAN);
    const now = Date.now();
    for (let i = start; i < end; i++) {
      let el = this.pool[i - start];
      if (!el) {
        el = this.makeRow();
        this.pool.push(el);
        this.body.append(el);
      }
      this.fill(el, this.rows[i], i, now);
    }
    for (const el of this.pool.splice(Math.max(0, end - start))) el.remove();
    const range = `${start}-${end}`;
    if (range !== this.range) {
      this.range = range;
      this.onRange?.(start, end);
    }

    let tabbable = this.pool.find((el) => el.dataset.key === this.activeKey) ?? this.pool[0];
    for (const el of this.pool) el.tabIndex = el === tabbable ? 0 : -1;
    if (focused !== null && document.activeElement?.dataset.key !== focused) {
      // The focused element now shows another row: follow the object, or
      // stay in place if it is gone.
      tabbable = this.pool.find((el) => el.dataset.key === focused);
      if (tabbable) {
        for (const el of this.pool) el.tabIndex = el === tabbable ? 0 : -1;
        tabbable.focus({preventScroll: true});
      } else if (this.body.contains(document.activeElement)) {
        this.activeKey = document.activeElement.dataset.key;
      }
    }
  }

  makeRow() {
    return h('div', {class: 'vt-row', role: 'row', tabindex: -1},
      this.columns.map((c, i) => h('div', {role: 'gridcell', class: `vt-cell${c.align === 'end' ? ' end' : ''}${c.mono ? ' mono' : ''}`,
        'aria-colindex': i + 1})));
  }

  fill(el, row, i, now) {
    row ??= this.placeholder();
    const y = `translateY(${i * this.rowHeight}px)`;
    if (el.style.transform !== y) el.style.transform = y;
    if (el.dataset.key !== row.key) el.dataset.key = row.key;
    if (el.dataset.rv !== row.rv) el.dataset.rv = row.rv;
    const idx = String(i + 2);
    if (el.getAttribute('aria-rowindex') !== idx) el.setAttribute('aria-rowindex', idx);
    const change = row.change && now - row.change.at < FLASH_MS ? row.change.type.toLowerCase() : '';
    if ((el.dataset.change ?? '') !== change) {
      if (change) el.dataset.change = change;
      else delete el.dataset.change;
    }
    const cells = el.children;
    for (let c = 0; c < this.columns.length; c++) {
      const col = this.columns[c];
      const v = row.values[c];
      const text = !row.key ? '…' : col.text ? col.text(v, now) : String(v ?? '');
      const cell = cells[c];
      if (cell.textContent !== text) {
        cell.textContent = text;
        cell.title = text; // the whole value, where the column cuts it short
      }
      const tone = row.tones[c] ?? '';
      if ((cell.dataset.tone ?? '') !== tone) {
        if (tone) cell.dataset.tone = tone;
        else delete cell.dataset.tone;
      }
    }
  }

  // placeholder is what a row not (yet) held shows.
  placeholder() {
    this.empty_ ??= {key: '', rv: '', values: this.columns.map(() => '…'), tones: [], change: null};
    return this.empty_;
  }

  indexOf(key) {
    return key ? this.rows.findIndex((r) => r?.key === key) : -1;
  }

  keydown(e) {
    const row = e.target.closest('.vt-row');
    if (!row) return;
    const i = this.indexOf(row.dataset.key);
    const page = Math.max(1, Math.floor(this.viewport.clientHeight / this.rowHeight) - 1);
    const to = {
      ArrowDown: i + 1, ArrowUp: i - 1, PageDown: i + page, PageUp: i - page,
      Home: 0, End: this.rows.length - 1,
    }[e.key];
    if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault();
      this.open(row.dataset.key);
    } else if (to !== undefined && !e.altKey && !e.metaKey) {
      e.preventDefault();
      this.focusIndex(to);
    }
  }

  open(key) {
    const row = this.rows[this.indexOf(key)];
    if (row) {
      this.activeKey = key;
      this.onOpen?.(row);
    }
  }

  // focusIndex scrolls row i into view and focuses it.
  focusIndex(i) {
    if (this.rows.length === 0) return;
    i = Math.max(0, Math.min(this.rows.length - 1, i));
    this.activeKey = this.rows[i]?.key ?? '';
    const rh = this.rowHeight;
    const vp = this.viewport;
    if (i * rh < vp.scrollTop) vp.scrollTop = i * rh;
    else if ((i + 1) * rh > vp.scrollTop + vp.clientHeight) vp.scrollTop = (i + 1) * rh - vp.clientHeight;
    this.render(false);
    this.pool.find((el) => el.dataset.key === this.activeKey)?.focus({preventScroll: true});
  }

  // focusKey focuses the row of an object, if it is in the table; it
  // returns whether it was.
  focusKey(key) {
    const i = this.indexOf(key);
    if (i < 0) return false;
    this.focusIndex(i);
    return true;
  }
}
