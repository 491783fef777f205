package browser

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// scaleSetupJS builds the dashboard's own view (ResourceView, ObjectStore,
// VirtualTable, pod columns) in an overlay, fed by a stand-in stream with a
// snapshot of 10,000 pods, and reports how long that took and what the DOM
// holds. window.scale keeps the view for the steps that follow.
const scaleSetupJS = `(async () => {
  const {ResourceView} = await import('/ui/view.js');
  const {VirtualTable} = await import('/ui/table.js');
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const box = document.createElement('div');
  box.style.cssText = 'position:fixed;inset:0;z-index:100;display:flex;background:#fff';
  document.body.append(box);
  let handler;
  const stream = {
    subscribe: (q, h) => { handler = h; return {close() {}}; },
    addEventListener() {}, removeEventListener() {},
  };
  let opened = '';
  const table = new VirtualTable(box, {label: 'scale', onOpen: (r) => { opened = r.key; }});
  const rows = {total: 0, shown: 0};
  const view = new ResourceView({
    resource: {name: 'pods', plural: 'pods', group: '', kind: 'Pod', namespaced: true, indexes: []},
    filters: {}, stream, table, onState() {}, onNotice() {}, onRows: (r) => Object.assign(rows, r),
  });
  const pod = (i, rv) => ({kind: 'Pod', metadata: {namespace: 'ns-' + (i % 40), name: 'pod-' + String(i).padStart(5, '0'),
    resourceVersion: String(rv), creationTimestamp: new Date(Date.now() - i * 1000).toISOString(), uid: 'u' + i},
    spec: {nodeName: 'node-' + (i % 100), containers: [{name: 'c'}]},
    status: {phase: 'Running', podIP: '10.1.' + (i >> 8) + '.' + (i & 255), containerStatuses: [{name: 'c', ready: true, restartCount: 0}]}});
  const t0 = performance.now();
  handler.begin({mode: 'snapshot'});
  for (let i = 0; i < 10000; i++) handler.event({type: 'ADDED', resourceVersion: String(i + 1), object: pod(i, i + 1)}, {snapshot: true});
  handler.synced({mode: 'snapshot', resourceVersion: '10000', replayed: 0});
  await frame(); await frame();
  const loadMs = performance.now() - t0;
  window.scale = {view, table, handler, pod, frame, rows, opened: () => opened};
  return {loadMs, total: rows.total, domRows: box.querySelectorAll('.vt-body .vt-row').length,
    ariaRows: +box.querySelector('.vt').getAttribute('aria-rowcount')};
})()`

// scaleUpdateJS applies live events to the 10,000 rows and reports how
// long the table took to show them.
const scaleUpdateJS = `(async () => {
  const {handler, pod, frame, rows} = window.scale;
  const t0 = performance.now();
  handler.event({type: 'MODIFIED', resourceVersion: '10001', object: pod(5000, 10001)}, {snapshot: false});
  handler.event({type: 'DELETED', resourceVersion: '10002', object: pod(5001, 10002)}, {snapshot: false});
  handler.event({type: 'ADDED', resourceVersion: '10003', object: pod(10000, 10003)}, {snapshot: false});
  await frame(); await frame();
  return {updateMs: performance.now() - t0, total: rows.total};
})()`

// TestTableAt10000Rows proves the table stays usable at 10,000 rows: the
// snapshot loads and renders quickly, only a window of rows is in the DOM,
// live events apply in a frame, the keyboard reaches the last row, and
// search narrows to one.
func TestTableAt10000Rows(t *testing.T) {
	p := newPage(t)
	ki := startKubeindex(t, "--demo")
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/"))

	var load struct {
		LoadMs   float64
		Total    int
		DOMRows  int
		AriaRows int
	}
	p.mustEval(scaleSetupJS, &load)
	t.Logf("10,000 pods: snapshot applied and drawn in %.0f ms; %d row elements in the DOM", load.LoadMs, load.DOMRows)
	if load.Total != 10000 || load.AriaRows != 10001 {
		t.Errorf("the table holds %d rows (aria-rowcount %d); expect 10000 (10001)", load.Total, load.AriaRows)
	}
	if load.DOMRows == 0 || load.DOMRows > 100 {
		t.Errorf("%d row elements in the DOM for 10,000 rows; expect a window of at most 100", load.DOMRows)
	}
	if load.LoadMs > 5000 {
		t.Errorf("loading 10,000 rows took %.0f ms; expect well under 5 s", load.LoadMs)
	}

	var upd struct {
		UpdateMs float64
		Total    int
	}
	p.mustEval(scaleUpdateJS, &upd)
	t.Logf("3 live events on 10,000 rows shown in %.1f ms", upd.UpdateMs)
	if upd.Total != 10000 {
		t.Errorf("after modify, delete and add: %d rows; expect 10000", upd.Total)
	}
	if upd.UpdateMs > 500 {
		t.Errorf("showing live events on 10,000 rows took %.0f ms; expect well under 500 ms", upd.UpdateMs)
	}

	// Keyboard: from the first row, End reaches the last (it is scrolled
	// into view and focused), Enter opens it.
	p.mustEval(`window.scale.table.focusIndex(0)`, nil)
	p.run("pressing End", chromedp.KeyEvent(kb.End))
	var focus struct {
		Key      string
		RowIndex string
		Last     string
	}
	focusJS := `(() => ({key: document.activeElement?.dataset?.key ?? '',
		rowIndex: document.activeElement?.getAttribute('aria-rowindex') ?? '',
		last: window.scale.table.rows.at(-1).key}))()`
	p.waitFor(5*time.Second, "End to focus the last row", func() (bool, string) {
		p.mustEval(focusJS, &focus)
		return focus.Key == focus.Last && focus.RowIndex == "10001", focus.Key + " at " + focus.RowIndex + "; last " + focus.Last
	})
	last := focus.Last
	p.run("pressing Enter", chromedp.KeyEvent(kb.Enter))
	var opened string
	p.mustEval(`window.scale.opened()`, &opened)
	if opened != last {
		t.Errorf("Enter opened %q; expect %s", opened, last)
	}
	p.run("pressing PageUp", chromedp.KeyEvent(kb.PageUp))
	p.mustEval(focusJS, &focus)
	if focus.Key == last || focus.Key == "" {
		t.Errorf("PageUp left focus on %q", focus.Key)
	}

	var shown int
	p.mustEval(`(async () => { window.scale.view.setQuick('pod-04321'); await window.scale.frame();
		return window.scale.rows.shown; })()`, &shown)
	if shown != 1 {
		t.Errorf("searching pod-04321 shows %d rows; expect 1", shown)
	}
	p.checkProblems()
}
