package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// questionLimit is the page size of every question: a dashboard's page.
const questionLimit = 100

// questionVariant is one question asked of both servers: a page of one of
// benchsqlite's questions at an offset, or its grouped counts.
type questionVariant struct {
	label       string
	kubeindex   string // URL
	sqlite      string // URL
	counts      bool
	page900     bool
	offset      int
	firstPageOf int // for a page 900: the index of its page 1 among the variants
	// changed: a pod changes (and kubeindex has the event) before each of
	// kubeindex's answers, so no answer finds its index as the last left it.
	changed bool
}

// questionVariants are page 1 and page 900 of each question (or, when
// fewer pods match, the last full page: totals holds each question's
// matches), and the counts, asked of kubeindex at kbase and SQLite at
// sbase; with changes, the first question's page 1 and the counts again,
// after a change.
func questionVariants(kbase, sbase string, cat questionCatalog, totals []int, changes bool) []questionVariant {
	var vs []questionVariant
	for qi, q := range cat.Questions {
		far := min(899, max(1, totals[qi]/questionLimit-1)) * questionLimit
		for _, offset := range []int{0, far} {
			v := questionVariant{
				label:     fmt.Sprintf("page 1 (%s)", q.Name),
				offset:    offset,
				kubeindex: questionURL(kbase, q.Query, offset),
				sqlite:    fmt.Sprintf("%s/questions?name=%s&limit=%d&offset=%d", sbase, url.QueryEscape(q.Name), questionLimit, offset),
			}
			if offset > 0 {
				v.label, v.page900, v.firstPageOf = fmt.Sprintf("page 900 (%s)", q.Name), true, len(vs)-1
			}
			vs = append(vs, v)
		}
	}
	if changes {
		v := vs[0]
		v.label, v.changed = "page 1 after a change ("+cat.Questions[0].Name+")", true
		vs = append(vs, v)
	}
	counts := questionVariant{label: "counts (" + cat.Counts.Name + ")", counts: true,
		kubeindex: kbase + "/api/v1/resources/pods/counts?" + cat.Counts.Query,
		sqlite:    sbase + "/counts"}
	vs = append(vs, counts)
	if changes {
		counts.label, counts.changed = "counts after a change ("+cat.Counts.Name+")", true
		vs = append(vs, counts)
	}
	return vs
}

// questionURL is kubeindex's page of a question at an offset.
func questionURL(base, query string, offset int) string {
	return fmt.Sprintf("%s/api/v1/pods?%s&limit=%d&offset=%d", base, query, questionLimit, offset)
}

// askQuestions reads the heaps of the questions' cluster (questionheap.go:
// a kubeindex with --lazy-columns, the default one settled, with an
// ordered index per pod column); then compares kubeindex's answers to
// questions with an in-memory SQLite's (steve's schema, loaded with the
// same pods' Table rows), both behind HTTP in a process of their own and
// asked by the same client, one request to each in turn; then the same
// page as a dashboard gets it from the API server (list every pod, filter
// and sort in the client) beside the seeded cluster's kubeindex; then the
// heap after the questions.
func (r *runner) askQuestions(ctx context.Context) error {
	var h questionHeaps
	var err error
	if h.base, err = r.emptyHeap(ctx); err != nil {
		return err
	}
	src, feed, n, lazy, err := r.questionSource(ctx)
	if err != nil {
		return err
	}
	h.lazy = lazy
	if h.settled, err = currentHeap(ctx, src); err != nil {
		return err
	}
	client := loopbackClient(2) // one keep-alive connection to each
	defer client.CloseIdleConnections()
	// A question's first answer builds its ordered index: every pod's
	// Table row rendered, a minute at 100,000 pods on a loaded machine.
	client.Timeout = 10 * time.Minute
	if err := r.columnIndexHeap(ctx, client, src, &h); err != nil {
		return err
	}
	sq, err := startProc("benchsqlite", r.sqliteBin, []string{"-source", src.base}, nil)
	if err != nil {
		return err
	}
	r.track(sq)
	defer sq.stop()
	var sqliteBase string
	select {
	case line := <-sq.stdoutC:
		sqliteBase = "http://" + strings.TrimPrefix(line, "READY ")
	case <-sq.exited:
		return fmt.Errorf("benchsqlite exited: %v: %s", sq.err, sq.logTail())
	case <-time.After(30 * time.Minute):
		return fmt.Errorf("benchsqlite not loaded in 30m: %s", sq.logTail())
	}
	var st sqliteStats
	if err := getJSON(ctx, client, sqliteBase+"/stats", &st); err != nil {
		return err
	}
	if st.Rows != n {
		return fmt.Errorf("benchsqlite loaded %d pods, want %d", st.Rows, n)
	}
	r.logf("questions: SQLite loaded %d pods in %.1f s: database %.0f MB, RSS %.0f → %.0f MB", st.Rows, st.LoadSeconds,
		float64(st.DBBytes)/(1<<20), float64(st.RSSBefore)/(1<<20), float64(st.RSSAfter)/(1<<20))

	var cat questionCatalog
	if err := getJSON(ctx, client, sqliteBase+"/catalog", &cat); err != nil {
		return err
	}
	if len(cat.Questions) == 0 || cat.Questions[0].Name != apiServerQuestion {
		return fmt.Errorf("benchsqlite's first question is not %q: %+v", apiServerQuestion, cat)
	}
	// Each question's first page (which builds its ordered index) says
	// how far its pages go.
	var cold []string
	totals := make([]int, len(cat.Questions))
	for i, q := range cat.Questions {
		t := time.Now()
		kb, err := getBody(ctx, client, questionURL(src.base, q.Query, 0))
		if err != nil {
			return err
		}
		cold = append(cold, fmt.Sprintf("page 1 (%s) %.0f ms", q.Name, ms(time.Since(t))))
		var p pageAnswer
		if err := json.Unmarshal(kb, &p); err != nil {
			return err
		}
		if p.Metadata.Total == nil {
			return fmt.Errorf("%s: kubeindex's page has no totalItemCount", q.Name)
		}
		totals[i] = *p.Metadata.Total
	}
	// Both answer the same (the first answers also warm both up).
	vs := questionVariants(src.base, sqliteBase, cat, totals, feed != "")
	pageBytes := make([]int, len(vs))
	for i, v := range vs {
		t := time.Now()
		kb, err := getBody(ctx, client, v.kubeindex)
		if err != nil {
			return err
		}
		if v.page900 || v.counts {
			cold = append(cold, fmt.Sprintf("%s %.0f ms", v.label, ms(time.Since(t))))
		}
		sb, err := getBody(ctx, client, v.sqlite)
		if err != nil {
			return err
		}
		if err := agree(v, kb, sb); err != nil {
			return err
		}
		pageBytes[i] = len(kb)
	}

	pairs := make([][2][][2]float64, len(vs)) // [variant][p50, p99] rounds of (kubeindex, SQLite)
	counts := make([]int, len(vs))
	for round := range r.o.Rounds {
		for i, v := range vs {
			var change func() error
			if v.changed {
				change = func() error { return changeAPod(ctx, client, feed, src) }
			}
			k, s, err := pairedTimes(ctx, client, r.o.LatencyRequests/10, r.o.RoundTime, v.kubeindex, v.sqlite, round%2 == 1, change)
			if err != nil {
				return err
			}
			pairs[i][0] = append(pairs[i][0], [2]float64{ms(percentile(k, .5)), ms(percentile(s, .5))})
			pairs[i][1] = append(pairs[i][1], [2]float64{ms(percentile(k, .99)), ms(percentile(s, .99))})
			counts[i] += len(k)
			r.logf("questions round %d, %s: kubeindex p50 %v p99 %v, SQLite p50 %v p99 %v (%d each)", round, v.label,
				percentile(k, .5), percentile(k, .99), percentile(s, .5), percentile(s, .99), len(k))
		}
	}
	for i, v := range vs {
		note := fmt.Sprintf("%d pods; sequential over keep-alive loopback HTTP, one client, kubeindex and SQLite in turn (which goes first alternating by round), %d requests each in %d rounds; kubeindex's answer %d bytes",
			n, counts[i], r.o.Rounds, pageBytes[i])
		if v.changed {
			note += "; before each of kubeindex's answers (untimed) the fake API server changed a pod's annotation and kubeindex had the event, so its ordered index had changed since the last answer"
		}
		f := pairFigure("question p50: "+v.label, "ms", sqliteAgainst, information, pairs[i][0], kOverC, func(float64) bool { return true })
		f.Note = note
		r.add(f)
		limit, target := 10.0, "<= 10 ms and ratio <= 1.0"
		if v.counts {
			limit, target = 20, "<= 20 ms and ratio <= 1.0"
		}
		f = pairFigure("question p99: "+v.label, "ms", sqliteAgainst, target, pairs[i][1], kOverC, func(x float64) bool { return x <= 1.0 })
		f.Met = f.Met && f.Kubeindex <= limit
		f.Note = note
		r.add(f)
		if v.page900 {
			var p [][2]float64
			for round := range pairs[i][1] {
				p = append(p, [2]float64{pairs[i][1][round][0], pairs[v.firstPageOf][1][round][0]})
			}
			f := pairFigure("question p99 page 900 vs page 1: "+strings.TrimPrefix(v.label, "page 900 "), "ms", "kubeindex's page 1, same rounds",
				"ratio <= 1.2", p, kOverC, func(x float64) bool { return x <= 1.2 })
			f.Note = fmt.Sprintf("page %d (offset %d) of %d matches; SQLite's page against its page 1, by round: %s", v.offset/questionLimit+1, v.offset,
				totals[(i-1)/2], sqliteGrowth(pairs[i][1], pairs[v.firstPageOf][1]))
			r.add(f)
		}
	}
	r.report.Context = append(r.report.Context, fmt.Sprintf("questions over %d pods, kubeindex's first (cold) answers: %s", n, strings.Join(cold, ", ")))
	if err := r.questionThroughAPIServer(ctx, cat.Questions[0].Query); err != nil {
		return err
	}

	if h.after, err = currentHeap(ctx, src); err != nil {
		return err
	}
	r.addHeapFigures(h, n)
	nf := float64(n)
	after := (h.after - h.base) * (1 << 20) / nf
	rssPerPod := float64(st.RSSAfter-st.RSSBefore) / nf
	r.add(&Figure{Name: "question memory per pod vs SQLite", Unit: "B", Kubeindex: after, Comparison: rssPerPod,
		Against: "SQLite process RSS growth over the load", Ratio: safeDiv(after, rssPerPod), Target: information, Met: true,
		Note: fmt.Sprintf("kubeindex: live heap per pod after the questions (all of it: objects, indexes, kept columns); SQLite: %.0f B per pod of database pages (objects, fields, 9 indexes), Go heap %.0f MB, loaded from kubeindex's Table in %.1f s",
			float64(st.DBBytes)/nf, float64(st.GoHeap)/(1<<20), st.LoadSeconds)})
	return nil
}

// sqliteAgainst names the comparison of the question figures.
const sqliteAgainst = "SQLite, steve's schema, same HTTP shape"

// questionCatalog is benchsqlite's GET /catalog: each question's name and
// kubeindex's parameters for it.
type questionCatalog struct {
	Questions []struct{ Name, Query string }
	Counts    struct{ Name, Query string }
}

// sqliteStats is benchsqlite's GET /stats.
type sqliteStats struct {
	Rows                         int
	DBBytes, RSSBefore, RSSAfter int64
	GoHeap                       int64
	LoadSeconds                  float64
}

func sqliteGrowth(far, first [][2]float64) string {
	var out []string
	for i := range far {
		out = append(out, ratioText(safeDiv(far[i][1], first[i][1])))
	}
	return strings.Join(out, ", ")
}

// currentHeap is k's live heap (MB): the median of three GCs made now.
func currentHeap(ctx context.Context, k *kubeindex) (float64, error) {
	gcs := len(k.gcs())
	if err := collectGarbage(ctx, k, gcs+3); err != nil {
		return 0, err
	}
	live, n := k.liveHeap(gcs)
	if n == 0 {
		return math.NaN(), nil
	}
	return live, nil
}

// pairedTimes times GETs of a and b, one of each in turn (b first when
// bFirst), count of each or as many as fit in budget (at least 5), and
// returns both sets of durations, sorted. beforeA, when not nil, runs
// (untimed) before each GET of a.
func pairedTimes(ctx context.Context, client *http.Client, count int, budget time.Duration, a, b string, bFirst bool, beforeA func() error) (as, bs []time.Duration, err error) {
	deadline := time.Now().Add(budget)
	order := []string{a, b}
	if bFirst {
		order = []string{b, a}
	}
	for i := 0; i < max(count, 5) && (i < 5 || time.Now().Before(deadline)); i++ {
		for _, u := range order {
			if u == a && beforeA != nil {
				if err := beforeA(); err != nil {
					return nil, nil, err
				}
			}
			t := time.Now()
			if _, err := getBody(ctx, client, u); err != nil {
				return nil, nil, err
			}
			if u == a {
				as = append(as, time.Since(t))
			} else {
				bs = append(bs, time.Since(t))
			}
		}
	}
	slices.Sort(as)
	slices.Sort(bs)
	return as, bs, nil
}

// timedGets times count GETs of u, or as many as fit in budget (at least
// 5), and returns their durations, sorted.
func timedGets(ctx context.Context, client *http.Client, count int, budget time.Duration, u string) ([]time.Duration, error) {
	deadline := time.Now().Add(budget)
	var ds []time.Duration
	for i := 0; i < max(count, 5) && (i < 5 || time.Now().Before(deadline)); i++ {
		t := time.Now()
		if _, err := getBody(ctx, client, u); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	return ds, nil
}

// getBody GETs u and returns the body of a 200.
func getBody(ctx context.Context, client *http.Client, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, b)
	}
	return b, nil
}

func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	b, err := getBody(ctx, client, u)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// pageAnswer is what the agreement check reads of a page.
type pageAnswer struct {
	Metadata struct {
		Total *int `json:"totalItemCount"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

func (p pageAnswer) keys() []string {
	var out []string
	for _, it := range p.Items {
		out = append(out, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	return out
}

// countsAnswer is what the agreement check reads of counts.
type countsAnswer struct {
	Total  *int `json:"total"`
	Groups []struct {
		Values []*string `json:"values"`
		Count  int       `json:"count"`
	} `json:"groups"`
}

func (c countsAnswer) byValues() map[string]int {
	out := map[string]int{}
	for _, g := range c.Groups {
		var vs []string
		for _, v := range g.Values {
			if v == nil {
				vs = append(vs, "<null>")
			} else {
				vs = append(vs, *v)
			}
		}
		out[strings.Join(vs, " × ")] = g.Count
	}
	return out
}

// agree checks that kubeindex's answer k and SQLite's s are the same:
// the same objects in the same order and the same total, or the same
// counts. An empty page is an error: it would agree with anything.
func agree(v questionVariant, k, s []byte) error {
	if v.counts {
		var ka, sa countsAnswer
		if err := firstErr(json.Unmarshal(k, &ka), json.Unmarshal(s, &sa)); err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		km, sm := ka.byValues(), sa.byValues()
		if ka.Total == nil || sa.Total == nil || *ka.Total != *sa.Total || len(km) == 0 || fmt.Sprint(km) != fmt.Sprint(sm) {
			return fmt.Errorf("%s: kubeindex and SQLite disagree:\nkubeindex %s\nSQLite    %s", v.label, k, s)
		}
		return nil
	}
	var ka, sa pageAnswer
	if err := firstErr(json.Unmarshal(k, &ka), json.Unmarshal(s, &sa)); err != nil {
		return fmt.Errorf("%s: %w", v.label, err)
	}
	kk, sk := ka.keys(), sa.keys()
	if ka.Metadata.Total == nil || sa.Metadata.Total == nil || *ka.Metadata.Total != *sa.Metadata.Total || len(kk) == 0 || !slices.Equal(kk, sk) {
		return fmt.Errorf("%s: kubeindex and SQLite disagree: totals %v and %v, pages\nkubeindex %v\nSQLite    %v",
			v.label, ka.Metadata.Total, sa.Metadata.Total, kk, sk)
	}
	return nil
}
