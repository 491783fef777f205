package browser

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestDashboardSearch types into the sidebar's search box and checks what
// a person sees: the query goes to /api/v1/search, the results are listed
// in the server's order with their rank and what matched, Enter on a
// result opens the object's detail (read from kubeindex), and Escape
// closes the results. The search route's answer is stood in for by the
// browser (the route itself is proven in its own package's tests); the
// object opened is kubeindex's.
func TestDashboardSearch(t *testing.T) {
	p := newPage(t)
	ki := startKubeindex(t, "--demo")
	var pods struct {
		Items []struct {
			Metadata struct{ Namespace, Name, UID string } `json:"metadata"`
		} `json:"items"`
	}
	getJSON(t, ki.URL+"/api/v1/pods?limit=2", &pods)
	if len(pods.Items) < 2 {
		t.Fatalf("the demo lists %d pods", len(pods.Items))
	}
	var items []map[string]any
	for i, it := range pods.Items {
		items = append(items, map[string]any{"resource": "pods", "namespace": it.Metadata.Namespace, "name": it.Metadata.Name,
			"rank": []string{"exact", "prefix"}[i], "match": "name", "key": "", "value": it.Metadata.Name,
			"object": map[string]any{"metadata": map[string]any{"namespace": it.Metadata.Namespace, "name": it.Metadata.Name, "uid": it.Metadata.UID}}})
	}
	answer, _ := json.Marshal(map[string]any{"kind": "SearchResult", "total": 7, "items": items})

	var mu sync.Mutex
	var asked []string
	chromedp.ListenTarget(p.ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		mu.Lock()
		asked = append(asked, e.Request.URL)
		mu.Unlock()
		go func() {
			ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
			defer cancel()
			chromedp.Run(ctx, fetch.FulfillRequest(e.RequestID, 200).
				WithResponseHeaders([]*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}}).
				WithBody(base64.StdEncoding.EncodeToString(answer)))
		}()
	})
	p.run("standing in for /api/v1/search", fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/v1/search*"}}))
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/#/services"))
	p.waitFor(30*time.Second, "the view to be live", func() (bool, string) {
		s := p.state()
		return s.Stream == "live", s.StreamText
	})

	p.setValue("#find-input", "web-")
	p.mustEval(`document.getElementById('find-form').requestSubmit()`, nil)
	var shown []struct{ Resource, Key, Rank string }
	p.waitFor(30*time.Second, "the search results", func() (bool, string) {
		p.mustEval(`[...document.querySelectorAll('#find-result tbody tr')].map((r) =>
			({resource: r.dataset.resource, key: r.dataset.key, rank: r.dataset.rank}))`, &shown)
		return len(shown) == 2, fmt.Sprint(shown)
	})
	mu.Lock()
	if len(asked) != 1 || !strings.Contains(asked[0], "q=web-") || !strings.Contains(asked[0], "limit=") {
		t.Errorf("the page asked %v; want one /api/v1/search?q=web-&limit=…", asked)
	}
	mu.Unlock()
	for i, it := range pods.Items {
		key := it.Metadata.Namespace + "/" + it.Metadata.Name
		if shown[i].Key != key || shown[i].Resource != "pods" {
			t.Errorf("result %d shows %+v; want pods %s in the server's order", i, shown[i], key)
		}
	}
	var summary string
	p.mustEval(`document.querySelector('#find-result .ip-summary').textContent`, &summary)
	if !strings.Contains(summary, "7 matches") {
		t.Errorf("summary %q; want the server's total, 7 matches", summary)
	}

	want := pods.Items[1].Metadata.Namespace + "/" + pods.Items[1].Metadata.Name
	p.mustEval(`document.querySelectorAll('#find-result tbody button')[1].focus()`, nil)
	p.run("opening the second result", chromedp.KeyEvent(kb.Enter))
	p.waitFor(30*time.Second, "the detail of "+want, func() (bool, string) {
		var d struct{ Title, JSON string }
		p.mustEval(`({title: document.getElementById('detail-title')?.textContent ?? '',
			json: document.querySelector('#detail .json')?.textContent ?? ''})`, &d)
		return d.Title == want && strings.Contains(d.JSON, "containerStatuses"), d.Title
	})
	p.run("closing the detail", chromedp.KeyEvent(kb.Escape))
	p.run("closing the results", chromedp.KeyEvent(kb.Escape))
	var hidden bool
	p.mustEval(`document.getElementById('find-result').hidden`, &hidden)
	if !hidden {
		t.Error("Escape left the search results open")
	}
	p.checkProblems()
}
