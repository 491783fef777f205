package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeindex/kubeindex/test/cluster"
)

// historyAnswer is kubeindex's answer to GET /api/v1/ip/{ip}?at=.
type historyAnswer struct {
	Kind         string      `json:"kind"`
	IP           string      `json:"ip"`
	Certainty    string      `json:"certainty"`
	HistorySince time.Time   `json:"historySince"`
	Match        string      `json:"match"`
	Via          string      `json:"via"`
	Owners       []histOwner `json:"owners"`
}

type histOwner struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       string    `json:"uid"`
	Role      string    `json:"role"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Since     string    `json:"since"`
}

func (o histOwner) String() string {
	return fmt.Sprintf("%s %s/%s %s %s", o.Kind, o.Namespace, o.Name, o.UID, o.Role)
}

// atResult is an answer at a moment: 200 with the answer, or an error
// Status.
type atResult struct {
	code   int
	ans    historyAnswer
	status statusBody
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// historyAt asks k who held ip at at.
func historyAt(k *kubeindex, ip string, at time.Time) (atResult, error) {
	path := ipPath(ip, rfc3339(at), 0, "")
	r, err := k.try(path)
	if err != nil {
		return atResult{}, err
	}
	res := atResult{code: r.code}
	if r.code == http.StatusOK {
		err = json.Unmarshal(r.body, &res.ans)
	} else {
		err = json.Unmarshal(r.body, &res.status)
	}
	if err != nil {
		return res, fmt.Errorf("GET %s: %d: %v: %s", path, r.code, err, r.body)
	}
	return res, nil
}

// ownerOf finds uid among an answer's owners.
func (r atResult) ownerOf(uid string) (histOwner, bool) {
	for _, o := range r.ans.Owners {
		if o.UID == uid {
			return o, true
		}
	}
	return histOwner{}, false
}

// holdsNow reports whether k's history has uid holding ip now (an open
// interval).
func holdsNow(k *kubeindex, ip, uid string) (bool, error) {
	r, err := historyAt(k, ip, time.Now())
	if err != nil {
		return false, err
	}
	if r.code != http.StatusOK && r.code != http.StatusNotFound {
		return false, fmt.Errorf("GET %s at now: %d %s", ip, r.code, r.status.Message)
	}
	o, ok := r.ownerOf(uid)
	return ok && o.To.IsZero(), nil
}

// span is when the test made a change, by its own clock: b just before the
// API call, s once every kubeindex's history and cache showed it. What
// kubeindex observed lies inside.
type span struct{ b, s time.Time }

func (sp span) contains(t time.Time) bool { return !t.Before(sp.b) && !t.After(sp.s) }

// wantAt is what the API server's objects and the test's clock say about
// ip at at: nobody (code 404), or the owners (pods of the API server, by
// UID) with a certainty.
type wantAt struct {
	what      string
	ip        string
	at        time.Time
	code      int
	certainty string
	owners    []*corev1.Pod
}

func (w wantAt) check(k *kubeindex) (atResult, error) {
	got, err := historyAt(k, w.ip, w.at)
	if err != nil {
		return got, err
	}
	path := ipPath(w.ip, rfc3339(w.at), 0, "")
	if got.code != w.code {
		return got, fmt.Errorf("%s: GET %s: %d %+v%+v, want %d", w.what, path, got.code, got.status, got.ans, w.code)
	}
	if w.code != http.StatusOK {
		return got, nil
	}
	var want, have []string
	for _, p := range w.owners {
		want = append(want, fmt.Sprintf("Pod %s/%s %s podIP", p.Namespace, p.Name, p.UID))
	}
	for _, o := range got.ans.Owners {
		have = append(have, o.String())
	}
	if d := cmp.Diff(want, have); d != "" || got.ans.Certainty != w.certainty {
		return got, fmt.Errorf("%s: GET %s: certainty %q, want %q; owners differ from the API server's pods (-want +got):\n%s",
			w.what, path, got.ans.Certainty, w.certainty, d)
	}
	if got.ans.Certainty == "exact" && got.ans.Match != "pod" {
		return got, fmt.Errorf("%s: GET %s: match %q, want pod", w.what, path, got.ans.Match)
	}
	return got, nil
}

// TestIPOwnersHistory: addresses are reused, and ?at= answers who held one
// at a moment, as the API server's objects and the test's clock say.
//
// X: pod A takes it; A is deleted gracefully and stays terminating (there
// is no kubelet), still holding X; pod C takes X; then A's delete ends:
// the late delete of the old owner must not end C's tenure.
// Y (and its IPv6 twin): pod web-0 takes it, is deleted, and is recreated
// under the same name with a new UID: two tenures, a gap between.
//
// Moments are taken by the test's clock around the API calls: away from
// every change by more than --ip-history-skew they are exact; within it of
// the change kubeindex reports (itself checked to lie inside the test's
// span of the API call) they are boundaries with both owners, ordered.
// Then both kubeindexes restart, while web-0 is deleted: the one with
// --ip-history-dir answers the moments before as before, refuses the
// downtime, and ends web-0; the one without says its history began anew.
func TestIPOwnersHistory(t *testing.T) {
	c := cluster.StartForTest(t)
	cs, _ := c.Clients(t)
	ctx := t.Context()
	const (
		skew = time.Second
		// margin keeps a moment clear of the skew around a change.
		margin = 250 * time.Millisecond
		ns     = "ipowners-history"
		node   = "ipowners-history-node"
		x      = "198.51.100.21"
		y      = "198.51.100.22"
		y6     = "2001:db8:ffff::22"
	)
	if err := cluster.EnsureNamespace(ctx, cs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args := []string{"--kubeconfig", c.Kubeconfig, "--resources", "pods", "--ip-history-skew", skew.String()}
	kDir := startKubeindex(t, append(args, "--ip-history-dir", dir)...)
	kMem := startKubeindex(t, args...)
	ks := []*kubeindex{kDir, kMem}
	api := newAPIServer(t, c)
	last := time.Now() // every history began before this

	// step makes one change and waits until every kubeindex has seen it
	// (seen is polled per kubeindex); it first lets 2×(skew+margin) pass
	// since the last change, so that a moment skew+margin after one change
	// is as far before the next.
	step := func(what string, do func() error, seen func(k *kubeindex) error) span {
		t.Helper()
		clockPast(last.Add(2 * (skew + margin)))
		sp := span{b: time.Now()}
		if err := do(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, k := range ks {
			eventually(t, converge, what, func() error { return seen(k) })
		}
		sp.s = time.Now()
		last = sp.s
		return sp
	}
	agrees := func(ip string) func(k *kubeindex) error {
		return func(k *kubeindex) error { _, err := sameOwnersNow(ctx, k, cs, ip, 0, ""); return err }
	}
	holds := func(ip string, p **corev1.Pod, want bool) func(k *kubeindex) error {
		return func(k *kubeindex) error {
			if err := agrees(ip)(k); err != nil {
				return err
			}
			got, err := holdsNow(k, ip, string((*p).UID))
			if err == nil && got != want {
				err = fmt.Errorf("the history of %s: %s holds it now: %v, want %v", ip, podKey(*p), got, want)
			}
			return err
		}
	}

	var a, cPod, web, web2 *corev1.Pod
	create := func(p **corev1.Pod, name string, ips ...string) func() error {
		return func() (err error) {
			*p, err = runningPod(ctx, cs, newPod(ns, name, node, false), ips)
			return err
		}
	}
	spA := step("A takes X", create(&a, "a", x), holds(x, &a, true))
	spTerm := step("A terminating, still holding X", func() error { return deleteGracefully(ctx, cs, a) },
		func(k *kubeindex) error {
			if err := sameObject(ctx, k, api, podsR, ns, "a"); err != nil {
				return err
			}
			return holds(x, &a, true)(k)
		})
	spC := step("C takes X while A terminates", create(&cPod, "c", x), func(k *kubeindex) error {
		if err := holds(x, &cPod, true)(k); err != nil {
			return err
		}
		return holds(x, &a, false)(k)
	})
	spLate := step("A's late delete", func() error { return deleteNow(ctx, cs, a) }, agrees(x))
	spWeb := step("web-0 takes Y", create(&web, "web-0", y, y6), holds(y, &web, true))
	spGone := step("web-0 deleted", func() error { return deleteNow(ctx, cs, web) }, holds(y, &web, false))
	spWeb2 := step("web-0 recreated with Y", create(&web2, "web-0", y, y6), holds(y, &web2, true))
	if web2.UID == web.UID {
		t.Fatalf("the recreated web-0 has the UID of the first: %s", web.UID)
	}
	clockPast(last.Add(skew + 2*margin)) // the last moment below is in the past

	after := func(sp span) time.Time { return sp.s.Add(skew + margin) }
	wants := []wantAt{
		{what: "X before A", ip: x, at: spA.b.Add(-skew - margin), code: http.StatusNotFound},
		{what: "X held by A", ip: x, at: after(spA), code: 200, certainty: "exact", owners: []*corev1.Pod{a}},
		{what: "X held by terminating A", ip: x, at: after(spTerm), code: 200, certainty: "exact", owners: []*corev1.Pod{a}},
		{what: "X held by C, A terminating", ip: x, at: after(spC), code: 200, certainty: "exact", owners: []*corev1.Pod{cPod}},
		{what: "X held by C after A's late delete", ip: x, at: after(spLate), code: 200, certainty: "exact", owners: []*corev1.Pod{cPod}},
		{what: "Y before web-0", ip: y, at: spWeb.b.Add(-skew - margin), code: http.StatusNotFound},
		{what: "Y held by web-0", ip: y, at: after(spWeb), code: 200, certainty: "exact", owners: []*corev1.Pod{web}},
		{what: "Y6 held by web-0", ip: y6, at: after(spWeb), code: 200, certainty: "exact", owners: []*corev1.Pod{web}},
		{what: "Y6 spelled in full, held by web-0", ip: expandIPv6(y6), at: after(spWeb), code: 200, certainty: "exact", owners: []*corev1.Pod{web}},
		{what: "Y between the two web-0", ip: y, at: after(spGone), code: http.StatusNotFound},
		{what: "Y held by the new web-0", ip: y, at: after(spWeb2), code: 200, certainty: "exact", owners: []*corev1.Pod{web2}},
		{what: "Y6 held by the new web-0", ip: y6, at: after(spWeb2), code: 200, certainty: "exact", owners: []*corev1.Pod{web2}},
	}
	// Boundaries, around the changes each kubeindex observed.
	boundaries := func(t *testing.T, k *kubeindex) []wantAt {
		t.Helper()
		r, err := wants[3].check(k) // C holds X, exact
		if err != nil {
			t.Fatal(err)
		}
		cFrom := r.ans.Owners[0].From
		r, err = wants[1].check(k) // A holds X, exact: it shows when A took X and lost it
		if err != nil {
			t.Fatal(err)
		}
		aOwner := r.ans.Owners[0]
		r, err = wants[6].check(k)
		if err != nil {
			t.Fatal(err)
		}
		webOwner := r.ans.Owners[0]
		r, err = wants[10].check(k)
		if err != nil {
			t.Fatal(err)
		}
		web2From := r.ans.Owners[0].From
		for _, e := range []struct {
			what string
			t    time.Time
			sp   span
		}{
			{"A took X", aOwner.From, spA}, {"A lost X to C", aOwner.To, spC}, {"C took X", cFrom, spC},
			{"web-0 took Y", webOwner.From, spWeb}, {"web-0 released Y", webOwner.To, spGone}, {"the new web-0 took Y", web2From, spWeb2},
		} {
			if !e.sp.contains(e.t) {
				t.Errorf("%s: %s at %s, outside the span [%s, %s] of its API call", k.URL, e.what, e.t, e.sp.b, e.sp.s)
			}
		}
		if !aOwner.To.Equal(cFrom) {
			t.Errorf("%s: A's tenure of X ends at %s, C's begins at %s: want one instant", k.URL, aOwner.To, cFrom)
		}
		return []wantAt{
			{what: "X just before C took it", ip: x, at: cFrom.Add(-skew / 2), code: 200, certainty: "boundary", owners: []*corev1.Pod{a, cPod}},
			{what: "X just after C took it", ip: x, at: cFrom.Add(skew / 2), code: 200, certainty: "boundary", owners: []*corev1.Pod{a, cPod}},
			{what: "X as A took it", ip: x, at: aOwner.From, code: 200, certainty: "boundary", owners: []*corev1.Pod{a}},
			{what: "Y just after web-0 released it", ip: y, at: webOwner.To.Add(skew / 2), code: 200, certainty: "boundary", owners: []*corev1.Pod{web}},
			{what: "Y just before the new web-0 took it", ip: y, at: web2From.Add(-skew / 2), code: 200, certainty: "boundary", owners: []*corev1.Pod{web2}},
		}
	}

	// Every kubeindex answers every moment so, and C's tenure is still
	// open after A's late delete.
	before := map[*kubeindex][]atResult{}
	for _, k := range ks {
		all := append(append([]wantAt{}, wants...), boundaries(t, k)...)
		for _, w := range all {
			r, err := w.check(k)
			if err != nil {
				t.Errorf("%s: %v", k.URL, err)
			}
			before[k] = append(before[k], r)
		}
		r, _ := wants[4].check(k)
		if o, ok := r.ownerOf(string(cPod.UID)); !ok || !o.To.IsZero() {
			t.Errorf("%s: after A's late delete, C's tenure of X: %+v, want open", k.URL, r.ans.Owners)
		}
		// Earlier than the history: an error, never a guess; later than
		// now: a bad request.
		since := r.ans.HistorySince
		if since.IsZero() || since.After(spA.b) {
			t.Errorf("%s: historySince %s, want before the first change %s", k.URL, since, spA.b)
		}
		for at, code := range map[time.Time]int{since.Add(-time.Millisecond): http.StatusGone, time.Now().Add(time.Hour): http.StatusBadRequest} {
			r, err := historyAt(k, x, at)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != code || code == http.StatusGone && r.status.Reason != "BeforeHistory" {
				t.Errorf("%s: X at %s: %d %+v, want %d", k.URL, at, r.code, r.status, code)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Run("Batch", func(t *testing.T) {
		var qs []batchQ
		for _, w := range wants {
			qs = append(qs, batchQ{IP: w.ip, At: rfc3339(w.at)})
		}
		// The same moment in Unix seconds with a fraction, as a number.
		m := after(spC).Truncate(time.Millisecond)
		qs = append(qs, batchQ{IP: x, At: json.Number(strconv.FormatInt(m.Unix(), 10) + "." + fmt.Sprintf("%03d", m.Nanosecond()/1e6))})
		good := len(qs)
		qs = append(qs,
			batchQ{IP: x, At: rfc3339(time.Now().Add(-24 * time.Hour))}, // before the history
			batchQ{IP: x, At: "yesterday"},
			batchQ{IP: x, At: rfc3339(time.Now().Add(time.Hour))},
			batchQ{IP: "nope", At: rfc3339(after(spC))},
			batchQ{IP: x, At: json.Number("-5")},
		)
		slots := checkBatchAgreesWithGets(t, kDir, qs)
		for i, w := range wants {
			if got := slotCode(slots[i]); got != w.code {
				t.Errorf("batch slot %d (%s): code %d, want %d", i, w.what, got, w.code)
			}
		}
		if slotCode(slots[good-1]) != 200 || !strings.Contains(fmt.Sprint(slots[good-1]["owners"]), string(cPod.UID)) {
			t.Errorf("batch: X at Unix seconds %v: %v, want C", qs[good-1].At, slots[good-1])
		}
		for i, code := range []int{http.StatusGone, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest} {
			if got := slotCode(slots[good+i]); got != code {
				t.Errorf("batch slot %d %+v: code %d, want %d", good+i, qs[good+i], got, code)
			}
		}
	})

	// Restart both, deleting web-0 while nobody watches; first let the
	// clock pass the skew, so that the changes the restart records (web-0's
	// tenure ends when the new lists show it gone) stay more than the skew
	// from every moment asked so far, whose answers must not change.
	clockPast(time.Now().Add(skew + margin))
	for _, k := range ks {
		k.stop(t)
	}
	stopped := time.Now()
	if err := deleteNow(ctx, cs, web2); err != nil {
		t.Fatal(err)
	}
	restarting := time.Now()
	kDir2 := startKubeindex(t, append(args, "--ip-history-dir", dir)...)
	kMem2 := startKubeindex(t, args...)
	ready := time.Now()
	eventually(t, converge, "Y released after the restart", func() error {
		for _, k := range []*kubeindex{kDir2, kMem2} {
			if err := agrees(y)(k); err != nil {
				return err
			}
		}
		// The restored history ends web-0's tenure once the lists show it
		// gone.
		r, err := wants[10].check(kDir2)
		if err != nil {
			return err
		}
		if o, _ := r.ownerOf(string(web2.UID)); o.To.IsZero() {
			return fmt.Errorf("the new web-0's tenure of Y is still open after the restart")
		}
		return nil
	})
	clockPast(time.Now().Add(skew + margin))
	later := time.Now()
	clockPast(later.Add(margin))

	t.Run("WithDir", func(t *testing.T) {
		all := append(append([]wantAt{}, wants...), boundaries(t, kDir2)...)
		for i, w := range all {
			r, err := w.check(kDir2)
			if err != nil {
				t.Errorf("after the restart: %v", err)
				continue
			}
			if w.code != 200 {
				continue
			}
			if !r.ans.HistorySince.Equal(before[kDir][i].ans.HistorySince) {
				t.Errorf("%s: historySince %s after the restart, %s before", w.what, r.ans.HistorySince, before[kDir][i].ans.HistorySince)
			}
			for j, o := range r.ans.Owners {
				was := before[kDir][i].ans.Owners[j]
				if !o.From.Equal(was.From) || !was.To.IsZero() && !o.To.Equal(was.To) {
					t.Errorf("%s: owner %s from %s to %s after the restart, from %s to %s before", w.what, o, o.From, o.To, was.From, was.To)
				}
				if o.UID == string(web2.UID) && (o.To.Before(restarting) || o.To.After(time.Now())) {
					t.Errorf("%s: the new web-0, deleted while kubeindex was down, ends at %s, want after the restart began %s", w.what, o.To, restarting)
				}
			}
		}
		gap := stopped.Add(restarting.Sub(stopped) / 2)
		if r, err := historyAt(kDir2, x, gap); err != nil || r.code != http.StatusGone || r.status.Reason != "BeforeHistory" {
			t.Errorf("X at %s, while kubeindex was down: %d %+v %v, want 410 BeforeHistory", gap, r.code, r.status, err)
		}
		// Now: C still holds X, from when it took it; Y is nobody's.
		w := wantAt{what: "X now", ip: x, at: later, code: 200, certainty: "exact", owners: []*corev1.Pod{cPod}}
		if r, err := w.check(kDir2); err != nil {
			t.Error(err)
		} else if was := before[kDir][3].ans.Owners[0]; !r.ans.Owners[0].From.Equal(was.From) {
			t.Errorf("C's tenure of X begins at %s after the restart, %s before", r.ans.Owners[0].From, was.From)
		}
		if _, err := (wantAt{what: "Y now", ip: y, at: later, code: http.StatusNotFound}).check(kDir2); err != nil {
			t.Error(err)
		}
	})

	t.Run("WithoutDir", func(t *testing.T) {
		for _, w := range wants {
			r, err := historyAt(kMem2, w.ip, w.at)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != http.StatusGone || r.status.Reason != "BeforeHistory" {
				t.Errorf("%s, before the restart: %d %+v %+v, want 410 BeforeHistory: the history began anew", w.what, r.code, r.status, r.ans)
			}
		}
		w := wantAt{what: "X now", ip: x, at: later, code: 200, certainty: "exact", owners: []*corev1.Pod{cPod}}
		r, err := w.check(kMem2)
		if err != nil {
			t.Fatal(err)
		}
		if since := r.ans.HistorySince; since.Before(stopped) || since.After(ready) {
			t.Errorf("historySince %s, want the restart, between %s and %s", since, stopped, ready)
		}
		// C was there when the history began: it holds X since it started.
		if o := r.ans.Owners[0]; o.Since != "start" || !o.From.Equal(cPod.Status.StartTime.Time) {
			t.Errorf("C after the restart: since %q from %s, want since start from %s (its status.startTime)", o.Since, o.From, cPod.Status.StartTime.Time)
		}
	})
}

// clockPast waits until the clock has passed t. The history is about
// instants: the test needs its moments apart by more than the skew, and
// only time passing makes them so.
func clockPast(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}
