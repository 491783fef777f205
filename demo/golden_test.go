package demo_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/demo"
)

var (
	update = flag.Bool("update", false, "rewrite testdata/scenario.golden")
	dump   = flag.String("dump", "", "also write every object and event in full to this file, to diff two versions")
)

// goldenSteps is how many churn steps the golden record covers: enough for
// every kind of change (scaling, starts, restarts, jobs, heartbeats).
const goldenSteps = 150

// TestScenarioGolden records what a user of --demo sees, through the HTTP
// API only: every object of every resource as first listed (the demo's own
// seed, a fixed clock), then every watch event of goldenSteps churn steps in
// resourceVersion order, and where each step ends. The golden file holds a
// hash of each object's JSON beside its identity, so a change of any byte
// of any object fails the test and the diff names the objects; -dump writes
// the full JSON to compare two versions of the package.
func TestScenarioGolden(t *testing.T) {
	t.Parallel()
	c, err := demo.NewTest(demo.Options{Seed: 1, HistorySize: 100000, BookmarkInterval: 10 * time.Millisecond,
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	resources := []string{"/api/v1/namespaces", "/api/v1/nodes", "/api/v1/pods", "/api/v1/services",
		"/apis/apps/v1/deployments", "/apis/apps/v1/replicasets"}

	var short, full bytes.Buffer
	line := func(prefix string, obj []byte) {
		md := gjson.GetBytes(obj, "metadata")
		fmt.Fprintf(&short, "%s %s/%s rv=%s %x\n", prefix, md.Get("namespace").Str, md.Get("name").Str,
			md.Get("resourceVersion").Str, sha256.Sum256(obj))
		fmt.Fprintf(&full, "%s %s\n", prefix, obj)
	}
	start := map[string]string{}
	for _, path := range resources {
		body := getBody(t, srv.URL+path)
		start[path] = gjson.GetBytes(body, "metadata.resourceVersion").Str
		for _, it := range gjson.GetBytes(body, "items").Array() {
			line("initial "+path, []byte(it.Raw))
		}
	}
	var ends []string
	for i := range goldenSteps {
		if err := c.Step(); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, fmt.Sprintf("step %d ends at rv=%s", i, c.ResourceVersion()))
	}
	final, _ := strconv.ParseUint(c.ResourceVersion(), 10, 64)
	type event struct {
		rv   uint64
		text string
		obj  []byte
	}
	var events []event
	for _, path := range resources {
		for _, e := range replay(t, srv.URL+path+"?watch=true&resourceVersion="+start[path], final) {
			rv, _ := strconv.ParseUint(gjson.GetBytes(e.Object, "metadata.resourceVersion").Str, 10, 64)
			events = append(events, event{rv, e.Type + " " + path, e.Object})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].rv < events[j].rv })
	for _, e := range events {
		line(e.text, e.obj)
	}
	for _, s := range ends {
		fmt.Fprintln(&short, s)
		fmt.Fprintln(&full, s)
	}

	if *dump != "" {
		if err := os.WriteFile(*dump, full.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "scenario.golden")
	if *update {
		if err := os.WriteFile(golden, short.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(short.Bytes(), want) {
		got, wantLines := bytes.Split(short.Bytes(), []byte("\n")), bytes.Split(want, []byte("\n"))
		for i := range min(len(got), len(wantLines)) {
			if !bytes.Equal(got[i], wantLines[i]) {
				t.Fatalf("the scenario differs from %s from line %d:\ngot  %s\nwant %s\n(-dump FILE writes the objects in full)",
					golden, i+1, got[i], wantLines[i])
			}
		}
		t.Fatalf("the scenario has %d lines, %s %d", len(got), golden, len(wantLines))
	}
}

func getBody(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b.Bytes()
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// replay reads a watch from a retained resourceVersion until a bookmark at
// last says every event up to it has been sent.
func replay(t *testing.T, url string, last uint64) []watchEvent {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"&allowWatchBookmarks=true&timeoutSeconds=30", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []watchEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e watchEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Type == "ERROR" {
			t.Fatalf("watch %s: %s %v", url, sc.Bytes(), err)
		}
		rv, _ := strconv.ParseUint(gjson.GetBytes(e.Object, "metadata.resourceVersion").Str, 10, 64)
		if e.Type == "BOOKMARK" {
			if rv >= last {
				return out
			}
			continue
		}
		out = append(out, e)
	}
	t.Fatalf("watch %s ended before a bookmark at %d", url, last)
	return nil
}
