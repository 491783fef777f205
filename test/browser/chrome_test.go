// Package browser tests the kubeindex dashboard in a real browser: Debian's
// chromium, headless, driven through the DevTools protocol (chromedp),
// against the kubeindex binary built from this repository.
//
// Without chromium the tests skip, saying how to install it; with the CI
// environment variable set they fail instead. Screenshots go to
// $KUBEINDEX_ARTIFACTS when set, else to the test's temporary directory;
// -update-screenshot also refreshes screenshot-demo.png here.
package browser

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the demo screenshot to screenshot-demo.png in this directory")

// chromiumPath finds chromium, or skips the test (fails it under CI).
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("KUBEINDEX_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	const msg = "chromium not found: install it with `apt-get install -y chromium` (or set KUBEINDEX_CHROMIUM to its path)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg + "; CI is set, so the browser tests must run")
	}
	t.Skip(msg)
	return ""
}

// page is one browser tab and what it reported.
type page struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	problems []string // uncaught exceptions and CSP violations
}

// newPage starts a headless chromium with a fresh profile and opens a tab
// of 1440×900. Everything is torn down when the test ends.
func newPage(t *testing.T) *page {
	t.Helper()
	exe := chromiumPath(t)
	// Not t.TempDir: chromium's helper processes may still write to the
	// profile for a moment after the browser exits, and the test must not
	// fail on that.
	profile, err := os.MkdirTemp("", "kubeindex-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.WindowSize(1440, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		for i := 0; os.RemoveAll(profile) != nil && i < 50; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	p := &page{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.problem("uncaught exception: " + ev.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if strings.Contains(ev.Entry.Text, "Content Security Policy") {
				p.problem("CSP violation: " + ev.Entry.Text)
			}
		}
	})
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable(),
		emulation.SetDeviceMetricsOverride(1440, 900, 1, false)); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return p
}

func (p *page) problem(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, s)
}

// checkProblems fails the test if the page threw or broke its CSP.
func (p *page) checkProblems() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.problems {
		p.t.Errorf("the page reported: %s", s)
	}
}

// run runs chromedp actions with a deadline, failing the test on error.
func (p *page) run(what string, actions ...chromedp.Action) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) into out.
func (p *page) eval(js string, out any) error {
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate(js, out, func(e *runtime.EvaluateParams) *runtime.EvaluateParams {
		return e.WithAwaitPromise(true)
	}))
}

func (p *page) mustEval(js string, out any) {
	p.t.Helper()
	if err := p.eval(js, out); err != nil {
		p.t.Fatalf("evaluating %.80q: %v", js, err)
	}
}

// waitFor polls cond every 100ms until it holds, failing the test after
// timeout with what and cond's last explanation.
func (p *page) waitFor(timeout time.Duration, what string, cond func() (bool, string)) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if detail != "" {
			last = detail
		}
		if time.Now().After(deadline) {
			p.screenshot("failure-" + sanitize(what))
			p.t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// state is what the dashboard shows, read from the DOM in one go.
type state struct {
	Count      int    `json:"count"`
	Shown      int    `json:"shown"`
	RowCount   int    `json:"rowCount"` // aria-rowcount, header included
	DOMRows    int    `json:"domRows"`
	Stream     string `json:"stream"`
	StreamText string `json:"streamText"`
	Conn       string `json:"conn"`
	Simulated  bool   `json:"simulated"`
	Notice     string `json:"notice"`
	NoticeTone string `json:"noticeTone"`
	Banner     string `json:"banner"`
	Title      string `json:"title"`
}

// visibleJS defines shown(el): whether a person would see el (hidden
// attributes overridden by a style, for one, would not fool it).
const visibleJS = `const shown = (el) => !!el && el.checkVisibility({opacityProperty: true, visibilityProperty: true});`

const stateJS = `(() => {
  ` + visibleJS + `
  const $ = (id) => document.getElementById(id);
  const notice = $('notice');
  const banner = $('stale-banner');
  return {
    count: +($('view-count').dataset.count || 0),
    shown: +($('view-count').dataset.shown || 0),
    rowCount: +(document.querySelector('.vt')?.getAttribute('aria-rowcount') || 0),
    domRows: document.querySelectorAll('.vt-body .vt-row').length,
    stream: $('stream-status').dataset.state || '',
    streamText: $('stream-status').textContent,
    conn: $('conn').dataset.state || '',
    simulated: shown($('simulated-badge')) && $('simulated-badge').textContent.trim() === 'SIMULATED',
    notice: shown(notice) ? $('notice-text').textContent : '',
    noticeTone: notice.dataset.tone || '',
    banner: shown(banner) ? banner.textContent : '',
    title: $('view-title').textContent,
  };
})()`

func (p *page) state() state {
	p.t.Helper()
	var s state
	p.mustEval(stateJS, &s)
	return s
}

func (s state) String() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// screenshot saves a PNG of the viewport and returns its path.
func (p *page) screenshot(name string) string {
	p.t.Helper()
	var png []byte
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	dir := os.Getenv("KUBEINDEX_ARTIFACTS")
	if dir == "" {
		dir = p.t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
	return path
}

// setValue sets an input's value as typing would (with an input event).
func (p *page) setValue(sel, value string) {
	p.t.Helper()
	p.mustEval(`(() => { const el = document.querySelector(`+jsString(sel)+`); el.value = `+jsString(value)+`;
		el.dispatchEvent(new Event('input', {bubbles: true})); })()`, nil)
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// jsString quotes s for embedding in JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
