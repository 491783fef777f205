package browser

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestDashboardSignIn runs kubeindex with static bearer tokens: the
// dashboard shows nothing but a sign-in form until it has a token the
// server accepts, says so when one is refused, then reads the REST API and
// the stream (whose WebSocket carries the token as a subprotocol entry)
// with it; signing out forgets the data and the token.
func TestDashboardSignIn(t *testing.T) {
	const token = "browser-test-token"
	p := newPage(t)
	tokens := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+`,alice,uid-alice,"viewers"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ki := startKubeindex(t, "--demo", "--auth=token", "--token-file", tokens)
	p.run("opening the dashboard", chromedp.Navigate(ki.URL+"/#/pods"))

	var view struct {
		SignIn  bool
		Layout  bool
		SignOut bool
		Error   string
		DOMRows int
	}
	viewJS := `(() => { ` + visibleJS + ` return {signIn: shown(document.getElementById('signin')),
		layout: shown(document.querySelector('.layout')), signOut: shown(document.getElementById('signout')),
		error: document.getElementById('signin-error').textContent,
		domRows: document.querySelectorAll('.vt-body .vt-row').length}; })()`
	read := func() string {
		p.mustEval(viewJS, &view)
		return fmt.Sprintf("%+v", view)
	}
	p.waitFor(10*time.Second, "the sign-in form, and nothing else", func() (bool, string) {
		s := read()
		return view.SignIn && !view.Layout && view.DOMRows == 0, s
	})

	p.run("signing in with a wrong token", chromedp.SendKeys("#token-input", "forged"+kb.Enter, chromedp.ByQuery))
	p.waitFor(10*time.Second, "the wrong token to be refused", func() (bool, string) {
		s := read()
		return view.SignIn && strings.Contains(view.Error, "refused"), s
	})
	p.screenshot("dashboard-signin")

	p.run("signing in", chromedp.SendKeys("#token-input", token+kb.Enter, chromedp.ByQuery))
	p.waitFor(30*time.Second, "the pods table over the authenticated stream", func() (bool, string) {
		var st resourceStatus
		getJSONAs(t, ki.URL+"/api/v1/resources/pods", token, &st)
		s := p.state()
		read()
		return !view.SignIn && view.SignOut && s.Stream == "live" && s.Count == st.Count,
			fmt.Sprintf("API: %d pods; page %v; %+v", st.Count, s, view)
	})

	p.run("signing out", chromedp.Click("#signout", chromedp.ByQuery))
	p.waitFor(10*time.Second, "the sign-in form again, with the rows gone", func() (bool, string) {
		s := read()
		return view.SignIn && !view.Layout && view.DOMRows == 0, s
	})
	var stored string
	p.mustEval(`sessionStorage.getItem('kubeindex.token') ?? ''`, &stored)
	if stored != "" {
		t.Errorf("the token is still stored after signing out")
	}
	p.checkProblems()
}
