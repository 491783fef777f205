package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestAQuestionsWalkExpiresWith410: the answers questions are paged
// through are bounded in number; a token into one no longer kept is a
// 410 Expired Status, as the API server answers a continue token it has
// compacted away, never a silently different page.
func TestAQuestionsWalkExpiresWith410(t *testing.T) {
	h := New(cachetest.Start(t, cachetest.PodSpec()).Cache, Options{Logger: quiet()}).Handler()
	first := do(t, h, http.MethodGet, "/api/v1/pods?sort=-age&limit=1")
	token := gjson.GetBytes(first.Body.Bytes(), "metadata.continue").Str
	if first.Code != 200 || token == "" {
		t.Fatalf("%d %s", first.Code, first.Body)
	}
	if next := do(t, h, http.MethodGet, "/api/v1/pods?sort=-age&limit=1&continue="+url.QueryEscape(token)); next.Code != 200 {
		t.Fatalf("the next page: %d %s", next.Code, next.Body)
	}
	for range 300 { // more walks than are kept
		do(t, h, http.MethodGet, "/api/v1/pods?sort=name&limit=1")
	}
	rec := do(t, h, http.MethodGet, "/api/v1/pods?sort=-age&limit=1&continue="+url.QueryEscape(token))
	st := gjson.ParseBytes(rec.Body.Bytes())
	if rec.Code != http.StatusGone || st.Get("reason").Str != "Expired" || st.Get("code").Int() != 410 {
		t.Fatalf("an expired walk: %d %s; expect 410 Expired", rec.Code, rec.Body)
	}
	if rec := do(t, h, http.MethodGet, "/api/v1/pods?sort=name&limit=1&continue="+url.QueryEscape(token)); rec.Code != 400 {
		t.Errorf("a token under another sort: %d %s; expect 400", rec.Code, rec.Body)
	}
}

// TestQuestionErrorsAre400sThatSayWhere: bad questions are refused with
// the parameter and position in the message.
func TestQuestionErrorsAre400sThatSayWhere(t *testing.T) {
	h := New(cachetest.Start(t, cachetest.PodSpec()).Cache, Options{Logger: quiet()}).Handler()
	for _, tc := range []struct{ target, expect string }{
		{"/api/v1/pods?filter=age%3Eabc", `filter: at position 5: "abc" is not a duration`},
		{"/api/v1/pods?filter=status=Running&filter=restarts%3Cx", `filter (occurrence 2): at position 10: "x" is not a number`},
		{"/api/v1/pods?sort=-a..b", `sort: at position 2: path "a..b"`},
		{"/api/v1/pods?fields=spec.containers.%23.image", `fields: at position 1: path "spec.containers.#.image": fields takes plain member paths`},
		{"/api/v1/pods?offset=-1", `bad request: offset must be an integer`},
		{"/api/v1/pods?fields=restarts,columns", `fields: at position 10: the object's own "columns" member cannot be kept`},
		{"/api/v1/pods?sort=name&sort=age", `bad request: query parameter "sort" given 2 times`},
		{"/api/v1/resources/pods/counts?groupBy=status,node,ip", `groupBy: at most 2 keys, got 3`},
		{"/api/v1/resources/pods/counts?filter=ready%3Dyes", `filter: at position 7: "yes" is not a fraction`},
	} {
		rec := do(t, h, http.MethodGet, tc.target)
		msg := gjson.GetBytes(rec.Body.Bytes(), "message").Str
		if rec.Code != 400 || len(msg) < len(tc.expect) || msg[:len(tc.expect)] != tc.expect {
			t.Errorf("%s: %d %q; expect 400 starting %q", tc.target, rec.Code, msg, tc.expect)
		}
	}
}

// TestFieldsTakeColumns: a column in fields= is its cell as the Table
// output prints it, under the item's "columns"; a leading "." keeps the
// member of that name.
func TestFieldsTakeColumns(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	h := New(f.Cache, Options{Logger: quiet()}).Handler()
	rec := do(t, h, http.MethodGet, "/api/v1/pods?namespace=kube-system&limit=3&fields=Restarts,status,node,.status.phase")
	items := gjson.GetBytes(rec.Body.Bytes(), "items").Array()
	if rec.Code != 200 || len(items) == 0 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	req := localRequest(http.MethodGet, "/k8s/api/v1/namespaces/kube-system/pods", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	tr := httptest.NewRecorder()
	h.ServeHTTP(tr, req)
	table := gjson.ParseBytes(tr.Body.Bytes())
	col := map[string]int{}
	for i, def := range table.Get("columnDefinitions").Array() {
		col[def.Get("name").Str] = i
	}
	cells := map[string]gjson.Result{}
	for _, row := range table.Get("rows").Array() {
		cells[row.Get("object.metadata.name").Str] = row.Get("cells")
	}
	for _, it := range items {
		row, ok := cells[it.Get("metadata.name").Str]
		if !ok {
			t.Fatalf("%s is not in the Table output", it.Get("metadata.name").Str)
		}
		cols := it.Get("columns")
		for key, name := range map[string]string{"restarts": "Restarts", "status": "Status", "node": "Node"} {
			if got, expect := cols.Get(key).Raw, row.Array()[col[name]].Raw; got != expect {
				t.Errorf("%s: column %s is %s; the Table output prints %s", it.Get("metadata.name").Str, key, got, expect)
			}
		}
		if it.Get("status.phase").Str == "" || it.Get("spec").Exists() {
			t.Errorf("the projected members: %s", it.Raw)
		}
		if keys := it.Get("columns.@keys").Raw; keys != `["restarts","status","node"]` {
			t.Errorf("columns %s; expect restarts, status, node in the order asked", keys)
		}
	}
}
