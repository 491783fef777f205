package browser

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestDashboardAsks opens the pods view of a simulated cluster too large
// to download (more than the dashboard's 5,000) and checks that it asks
// the server: the counts shown are the counts route's, a filter chip
// narrows the rows as the server's filter does, a filter the server
// refuses shows its message and is not added, a click on a column sorts
// as the server sorts, scrolling far down shows the server's rows there,
// and Enter opens the whole object.
func TestDashboardAsks(t *testing.T) {
	ki := startKubeindexWithin(t, 5*time.Minute, "--demo", "--demo-pods", "6000")
	p := newPage(t)
	p.run("opening the pods view", chromedp.Navigate(ki.URL+"/#/pods"))
	p.waitFor(2*time.Minute, "the pods view to be live", func() (bool, string) {
		s := p.state()
		return s.Stream == "live", s.StreamText
	})
	countMatchesServer(t, p, ki.URL)
	statusCountsMatchServer(t, p, ki.URL, nil)
	checkMode(t, p)

	// A filter the server refuses: its message, no chip.
	p.setValue("#ask-input", "age>abc")
	p.mustEval(`document.getElementById('ask-form').requestSubmit()`, nil)
	var refused string
	p.waitFor(30*time.Second, "the server's message for age>abc", func() (bool, string) {
		p.mustEval(`document.getElementById('ask-error').textContent`, &refused)
		return strings.Contains(refused, "position"), refused
	})
	if n := chips(p); len(n) != 0 {
		t.Errorf("a refused filter added chips %v", n)
	}

	// A filter the server takes: a chip, and the server's count.
	p.setValue("#ask-input", "status!=Running")
	p.mustEval(`document.getElementById('ask-form').requestSubmit()`, nil)
	p.waitFor(30*time.Second, "the chip status!=Running", func() (bool, string) {
		c := chips(p)
		return fmt.Sprint(c) == "[status!=Running]", fmt.Sprint(c)
	})
	countMatchesQuestion(t, p, ki.URL, "status!=Running")
	statusCountsMatchServer(t, p, ki.URL, []string{"status!=Running"})

	// Removing it, by keyboard.
	p.mustEval(`document.querySelector('.ask-chip button').focus()`, nil)
	p.run("removing the chip", chromedp.KeyEvent(kb.Enter))
	p.waitFor(30*time.Second, "the chip to go", func() (bool, string) {
		c := chips(p)
		return len(c) == 0, fmt.Sprint(c)
	})
	countMatchesServer(t, p, ki.URL)

	for _, click := range []string{"ascending", "descending"} {
		var c clickProbe
		p.mustEval(sortClickJS("Restarts"), &c)
		if c.MS < 0 {
			t.Fatalf("sorting by Restarts (%s): the rows never showed that order", click)
		}
		rowsInServerOrder(t, p, ki.URL, map[string]string{"ascending": "restarts", "descending": "-restarts"}[click])
	}

	// Far down: the rows there are the server's rows at that offset.
	p.mustEval(`(() => { const vp = document.querySelector('.vt-viewport'); vp.scrollTop = 4000 * 34; })()`, nil)
	p.waitFor(60*time.Second, "the rows at 4000 to be the server's", func() (bool, string) {
		var shown struct {
			First int
			Keys  []string
		}
		p.mustEval(`(() => { const rows = [...document.querySelectorAll('.vt-body .vt-row')]
			.map((r) => [r.dataset.key, +r.getAttribute('aria-rowindex') - 2]).filter(([k]) => k).sort((a, b) => a[1] - b[1]);
			return {first: rows[10]?.[1] ?? -1, keys: rows.slice(10, 15).map(([k]) => k)}; })()`, &shown)
		if shown.First < 3900 {
			return false, fmt.Sprintf("first row shown %d", shown.First)
		}
		want := serverKeys(t, ki.URL, url.Values{"sort": {"-restarts"}, "offset": {fmt.Sprint(shown.First)}, "limit": {"5"}})
		return fmt.Sprint(shown.Keys) == fmt.Sprint(want), fmt.Sprintf("at %d shown %v; server %v", shown.First, shown.Keys, want)
	})

	// Enter on a row opens the whole object, read from the server.
	var key string
	p.mustEval(`(() => { const r = [...document.querySelectorAll('.vt-body .vt-row')].find((r) => r.dataset.key &&
		r.getBoundingClientRect().top > 200); r.focus(); return r.dataset.key; })()`, &key)
	p.run("opening a row", chromedp.KeyEvent(kb.Enter))
	p.waitFor(30*time.Second, "the detail of "+key, func() (bool, string) {
		var d struct{ Title, JSON string }
		p.mustEval(`({title: document.getElementById('detail-title')?.textContent ?? '',
			json: document.querySelector('#detail .json')?.textContent ?? ''})`, &d)
		return d.Title == key && strings.Contains(d.JSON, "readinessProbe"), d.Title
	})
	p.checkProblems()
}

// windowsJS asks the server, on a socket of its own, for a window of one
// row: whether it answers WINDOW (it has live windows) or refuses the op.
const windowsJS = `new Promise((resolve) => {
  const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/api/v1/stream');
  ws.onopen = () => ws.send(JSON.stringify({op: 'window', id: 'probe', resource: 'pods', limit: 1}));
  ws.onmessage = (e) => { const m = JSON.parse(e.data); if (m.id !== 'probe') return; ws.close(); resolve(m.type === 'WINDOW'); };
  ws.onerror = () => resolve(false);
})`

// checkMode: the view keeps its rows live by a window when the server has
// windows, and asks the REST API again otherwise. It returns the mode.
func checkMode(t *testing.T, p *page) string {
	t.Helper()
	var has bool
	var mode string
	p.mustEval(windowsJS, &has)
	p.mustEval(`document.querySelector('.vt').dataset.mode ?? ''`, &mode)
	if want := map[bool]string{true: "window", false: "rest"}[has]; mode != want {
		t.Errorf("the view asks by %q; want %q (the server has windows: %v)", mode, want, has)
	}
	return mode
}

func chips(p *page) []string {
	var out []string
	p.mustEval(`[...document.querySelectorAll('#ask-chips .ask-chip span')].map((s) => s.textContent)`, &out)
	return out
}

// countMatchesQuestion waits until the count shown is the server's count
// for filter.
func countMatchesQuestion(t *testing.T, p *page, api, filter string) {
	t.Helper()
	p.waitFor(60*time.Second, "the view's count to be the server's for "+filter, func() (bool, string) {
		var counts struct{ Total int }
		getJSON(t, api+"/api/v1/resources/pods/counts?"+url.Values{"filter": {filter}}.Encode(), &counts)
		s := p.state()
		return s.Count == counts.Total, fmt.Sprintf("server counts %d; page %v", counts.Total, s)
	})
}

// statusCountsMatchServer waits until the counts per status shown are the
// counts route's per status for filters.
func statusCountsMatchServer(t *testing.T, p *page, api string, filters []string) {
	t.Helper()
	p.waitFor(60*time.Second, "the counts per status to be the server's", func() (bool, string) {
		var counts struct {
			Groups []struct {
				Values []*string
				Count  int
			}
		}
		getJSON(t, api+"/api/v1/resources/pods/counts?"+url.Values{"groupBy": {"status"}, "filter": filters}.Encode(), &counts)
		want := map[string]int{}
		for _, g := range counts.Groups {
			if g.Values[0] != nil {
				want[*g.Values[0]] = g.Count
			}
		}
		shown := map[string]int{}
		p.mustEval(`Object.fromEntries([...document.querySelectorAll('#counts button[data-key="status"]')]
			.map((b) => [b.dataset.value, +b.dataset.count]))`, &shown)
		return fmt.Sprint(shown) == fmt.Sprint(want), fmt.Sprintf("shown %v; server %v", shown, want)
	})
}

// serverKeys lists the keys of the pods the server answers q with.
func serverKeys(t *testing.T, api string, q url.Values) []string {
	t.Helper()
	q.Set("fields", "metadata.name")
	var list struct {
		Items []struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		} `json:"items"`
	}
	getJSON(t, api+"/api/v1/pods?"+q.Encode(), &list)
	var keys []string
	for _, it := range list.Items {
		keys = append(keys, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	return keys
}

// TestWindowOps applies the window protocol's row operations with the
// dashboard's own module, and checks that an op that does not fit the rows
// held throws rather than showing wrong rows.
func TestWindowOps(t *testing.T) {
	p := newPage(t)
	ki := startKubeindex(t, "--demo")
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/"))
	var got struct {
		Rows    []string
		Throws  []bool
		Message map[string]any
	}
	p.mustEval(`(async () => {
  const {applyOps, windowMessage} = await import('/ui/window.js');
  const rows = applyOps(['a', 'b', 'c', 'd'], [{op: 'remove', at: 1}, {op: 'insert', at: 0, row: 'x'},
    {op: 'move', from: 3, to: 1, row: 'D'}, {op: 'update', at: 0, row: 'X'}, {op: 'insert', at: 4, row: 'e'}]);
  const throws = [[{op: 'remove', at: 1}], [{op: 'insert', at: 2, row: 'z'}], [{op: 'move', from: 0, to: 1, row: 'z'}],
    [{op: 'update', at: -1, row: 'z'}], [{op: 'swap', at: 0}]].map((ops) => { try { applyOps(['a'], ops); return false; } catch { return true; } });
  return {rows, throws, message: windowMessage('w1', {resource: 'pods', filter: ['status!=Running'], sort: '-restarts', namespace: ''}, 'r1')};
})()`, &got)
	if fmt.Sprint(got.Rows) != "[X D a c e]" {
		t.Errorf("rows after the ops: %v; want [X D a c e]", got.Rows)
	}
	if fmt.Sprint(got.Throws) != "[true true true true true]" {
		t.Errorf("ops that do not fit threw: %v; want all to", got.Throws)
	}
	if fmt.Sprint(got.Message) != "map[filter:[status!=Running] id:w1 limit:100 offset:0 op:window resource:pods resume:r1 sort:-restarts]" {
		t.Errorf("window message %v", got.Message)
	}
	p.checkProblems()
}
