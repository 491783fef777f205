package query

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/internal/table"
)

var now = time.Date(2025, 1, 2, 12, 0, 0, 0, time.UTC)

var pods = NewSchema(table.ForResource(schema.GroupResource{Resource: "pods"}))

// pod is a test pod: what the generator below writes as JSON.
type pod struct {
	ns, name string
	age      time.Duration
	phase    string
	node     string
	app      string // label app; "" for none
	restarts []int  // per container
	ready    []bool // per container
	ip       string
	images   []string
}

func (p pod) json() []byte {
	var statuses, containers []map[string]any
	for i := range p.restarts {
		statuses = append(statuses, map[string]any{"name": fmt.Sprint("c", i), "restartCount": p.restarts[i], "ready": p.ready[i],
			"state": map[string]any{"running": map[string]any{"startedAt": "2025-01-01T00:00:00Z"}}})
		img := "busybox"
		if i < len(p.images) {
			img = p.images[i]
		}
		containers = append(containers, map[string]any{"name": fmt.Sprint("c", i), "image": img})
	}
	md := map[string]any{"name": p.name, "namespace": p.ns, "uid": "u-" + p.name, "resourceVersion": "7",
		"creationTimestamp": now.Add(-p.age).Format(time.RFC3339)}
	if p.app != "" {
		md["labels"] = map[string]any{"app": p.app}
	}
	status := map[string]any{"phase": p.phase, "containerStatuses": statuses}
	if p.ip != "" {
		status["podIP"] = p.ip
		status["podIPs"] = []any{map[string]any{"ip": p.ip}}
	}
	b, _ := json.Marshal(map[string]any{"kind": "Pod", "apiVersion": "v1", "metadata": md,
		"spec": map[string]any{"nodeName": p.node, "containers": containers}, "status": status})
	return b
}

func (p pod) record() *Record { return pods.Record(p.ns, p.name, p.json(), now) }

var web0 = pod{ns: "a", name: "web-0", age: 90 * time.Minute, phase: "Running", node: "n1", app: "web",
	restarts: []int{3, 2}, ready: []bool{true, false}, ip: "10.0.0.1", images: []string{"nginx:1.27", "envoy:1"}}

func TestFilterTerms(t *testing.T) {
	for _, tc := range []struct {
		given  []string
		expect bool
	}{
		{[]string{"status=Running"}, true},
		{[]string{"status==Running"}, true},
		{[]string{"status!=Running"}, false},
		{[]string{"status=running"}, false}, // = is exact
		{[]string{"status~runn"}, true},     // ~ is case-insensitive
		{[]string{"status in (Pending, Running)"}, true},
		{[]string{"status notin (Pending,Running)"}, false},
		{[]string{"status.phase=Running"}, true},
		{[]string{".status.phase=Running"}, true},
		{[]string{"restarts=5"}, true}, // the column sums the containers'
		{[]string{"restarts>4"}, true},
		{[]string{"restarts>=6"}, false},
		{[]string{"ready=1/2"}, true},
		{[]string{"ready<1"}, true},
		{[]string{"ready>=0.5"}, true},
		{[]string{"age>1h"}, true},
		{[]string{"age>1h31m"}, false},
		{[]string{"age<=2h"}, true},
		{[]string{"age<90m"}, false},
		{[]string{"ip=10.0.0.1"}, true},
		{[]string{"node=n1"}, true},
		{[]string{"name~WEB"}, true},
		{[]string{"namespace=a"}, true},
		{[]string{"metadata.labels.app"}, true},
		{[]string{"!metadata.labels.app"}, false},
		{[]string{"!metadata.labels.tier"}, true},
		{[]string{"metadata.labels.tier!=x"}, true}, // missing satisfies !=
		{[]string{"metadata.labels.tier=x"}, false},
		{[]string{"spec.containers.#.image=envoy:1"}, true}, // arrays flattened
		{[]string{"spec.containers.#.image~NGINX"}, true},
		{[]string{"spec.containers.#.image!=envoy:1"}, false},
		{[]string{"spec.containers.#.image notin (a,b)"}, true},
		{[]string{"status.containerStatuses.#.restartCount>2"}, true},
		{[]string{"status.containerStatuses.#.restartCount>3"}, false},
		{[]string{`spec.containers.#(name=="c1").image=envoy:1`}, true}, // gjson queries stay in the key
		{[]string{`status="Running"`}, true},
		{[]string{`metadata.name="web-0", status=Pending`}, true}, // ORed
		{[]string{"status=Pending,node=n1"}, true},
		{[]string{"status=Pending", "node=n1"}, false}, // ANDed
		{[]string{"status=Running", "node=n1"}, true},
		{[]string{"metadata.name>web"}, true}, // text by bytes
		{[]string{"status.phase>5"}, true},    // text against a numeric literal: as text
	} {
		t.Run(strings.Join(tc.given, "&"), func(t *testing.T) {
			f, err := pods.ParseFilter(tc.given, now)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match(web0.record()); got != tc.expect {
				t.Fatalf("given %q, expect %v, got %v", tc.given, tc.expect, got)
			}
		})
	}
}

func TestFilterErrorsNameTheParameterAndPosition(t *testing.T) {
	for _, tc := range []struct {
		given  []string
		expect string
	}{
		{[]string{"age>abc"}, `filter: at position 5: "abc" is not a duration`},
		{[]string{"restarts<x"}, `filter: at position 10: "x" is not a number, as restarts needs`},
		{[]string{"ready=yes"}, `filter: at position 7: "yes" is not a fraction`},
		{[]string{"status=Running", "age>>1"}, `filter (occurrence 2): at position 5: ">1" is not a duration`},
		{[]string{"status=Running,"}, `filter: at position 16: expected a key, found the end`},
		{[]string{"=x"}, `filter: at position 1: expected a key, found "=x"`},
		{[]string{"status in Running"}, `filter: at position 8: expected an operator`},
		{[]string{"status in (a,b"}, `filter: at position 15: the list is not closed`},
		{[]string{`status="Run`}, `filter: at position 8: the quoted value is not closed`},
		{[]string{`status="a" b`}, `filter: at position 12: expected "," after the quoted value`},
		{[]string{"restarts~3"}, `filter: at position 9: ~ compares text, and restarts is a number key`},
		{[]string{"a..b=1"}, `filter: at position 1: path "a..b"`},
		{[]string{"metadata.labels[=1"}, `filter: at position 1: path`},
	} {
		t.Run(strings.Join(tc.given, "&"), func(t *testing.T) {
			_, err := pods.ParseFilter(tc.given, now)
			if err == nil || !strings.HasPrefix(err.Error(), tc.expect) {
				t.Fatalf("given %q, expect an error starting %q, got %v", tc.given, tc.expect, err)
			}
		})
	}
}

func TestSortAndKeyErrors(t *testing.T) {
	for _, tc := range []struct{ given, expect string }{
		{"restarts,-a..b", `sort: at position 11: path "a..b"`},
		{"", ""},
		{"-age,name", ""},
	} {
		_, err := pods.ParseSort(tc.given)
		if (err == nil) != (tc.expect == "") || err != nil && !strings.HasPrefix(err.Error(), tc.expect) {
			t.Errorf("given %q, expect %q, got %v", tc.given, tc.expect, err)
		}
	}
	if _, err := pods.ParseKeys("groupBy", "status,node,ip", MaxGroupBy, false); err == nil || !strings.Contains(err.Error(), "at most 2") {
		t.Errorf("three groupBy keys: %v", err)
	}
}

func TestSortOrders(t *testing.T) {
	ps := []pod{
		{ns: "a", name: "x", age: time.Hour, phase: "Running", restarts: []int{4}, ready: []bool{true}},
		{ns: "a", name: "y", age: 2 * time.Hour, phase: "Pending", restarts: []int{1}, ready: []bool{false}},
		{ns: "b", name: "x", age: 3 * time.Hour, phase: "Running", restarts: []int{4}, ready: []bool{true}},
		{ns: "a", name: "z", age: 30 * time.Minute, phase: "", restarts: []int{10, 1}, ready: []bool{true, false}},
	}
	for _, tc := range []struct{ given, expect string }{
		{"restarts", "a/y a/x b/x a/z"},
		{"-restarts", "a/z a/x b/x a/y"},
		{"age", "a/z a/x a/y b/x"},
		{"-age", "b/x a/y a/x a/z"},
		{"status.phase", "a/z a/y a/x b/x"}, // "" is a value, the least text
		{"-ready,name", "a/x b/x a/z a/y"},  // 1 1 1/2 0
		{".status.phase,-name", "a/z a/y a/x b/x"},
		{"metadata.labels.app", "a/x a/y a/z b/x"}, // all missing: namespace/name
	} {
		keys, err := pods.ParseSort(tc.given)
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			p  pod
			vs []Value
		}
		var rows []row
		for _, p := range ps {
			rows = append(rows, row{p, SortValues(keys, p.record())})
		}
		// insertion sort: the test's own, independent of slices.SortFunc
		for i := 1; i < len(rows); i++ {
			for j := i; j > 0 && CompareSorted(keys, rows[j].vs, rows[j-1].vs, rows[j].p.ns, rows[j].p.name, rows[j-1].p.ns, rows[j-1].p.name) < 0; j-- {
				rows[j], rows[j-1] = rows[j-1], rows[j]
			}
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.p.ns+"/"+r.p.name)
		}
		if strings.Join(got, " ") != tc.expect {
			t.Errorf("sort=%s: expect %s, got %s", tc.given, tc.expect, strings.Join(got, " "))
		}
	}
}

func TestCounterGroups(t *testing.T) {
	keys, err := pods.ParseKeys("groupBy", "status.phase,node", MaxGroupBy, false)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter(keys)
	for _, p := range []pod{
		{ns: "a", name: "1", phase: "Running", node: "n1"},
		{ns: "a", name: "2", phase: "Running", node: "n1"},
		{ns: "a", name: "3", phase: "Running", node: "n2"},
		{ns: "a", name: "4", phase: "Pending"},
	} {
		c.Add(p.record())
	}
	b, _ := json.Marshal(c.Groups())
	expect := `[{"Values":["Running","n1"],"Count":2},{"Values":["Pending",null],"Count":1},{"Values":["Running","n2"],"Count":1}]`
	if string(b) != expect || c.Total() != 4 {
		t.Fatalf("expect %s, got %s (total %d)", expect, b, c.Total())
	}
	c.Remove(pod{ns: "a", name: "4", phase: "Pending"}.record())
	c.Remove(pod{ns: "a", name: "1", phase: "Running", node: "n1"}.record())
	b, _ = json.Marshal(c.Groups())
	expect = `[{"Values":["Running","n1"],"Count":1},{"Values":["Running","n2"],"Count":1}]`
	if string(b) != expect || c.Total() != 2 {
		t.Fatalf("after removals, expect %s, got %s (total %d)", expect, b, c.Total())
	}
}

func TestProjection(t *testing.T) {
	for _, tc := range []struct{ given, expect string }{
		{"status.phase", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"a","uid":"u-web-0","resourceVersion":"7"},"status":{"phase":"Running"}}`},
		{"metadata.labels,spec.nodeName,metadata.labels.app", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"a","uid":"u-web-0","resourceVersion":"7","labels":{"app":"web"}},"spec":{"nodeName":"n1"}}`},
		{".status.nothing,metadata", `{"kind":"Pod","apiVersion":"v1","metadata":{"annotations":null}}`},
	} {
		p, err := ParseFields(tc.given)
		if err != nil {
			t.Fatal(err)
		}
		got := string(p.Apply(nil, web0.json()))
		if tc.given == ".status.nothing,metadata" {
			// metadata kept whole: compare with the pod's own
			var whole, proj map[string]any
			json.Unmarshal(web0.json(), &whole)
			if err := json.Unmarshal([]byte(got), &proj); err != nil || fmt.Sprint(proj["metadata"]) != fmt.Sprint(whole["metadata"]) || proj["status"] != nil {
				t.Errorf("fields=%s: got %s", tc.given, got)
			}
			continue
		}
		if got != tc.expect {
			t.Errorf("fields=%s:\nexpect %s\ngot    %s", tc.given, tc.expect, got)
		}
	}
	for _, bad := range []string{"spec.containers.#.image", "a..b", "status,", "restarts~"} {
		if _, err := ParseFields(bad); err == nil {
			t.Errorf("fields=%s: expected an error", bad)
		}
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"status=Running", "age>5m,restarts<=3", `a.b in (1,"2,3")`, "!x", `spec.containers.#(name=="a").image~X`, "ready>=1/2", "x notin ()"} {
		f.Add(s)
	}
	rec := web0.record()
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := pods.ParseFilter([]string{s}, now)
		if err != nil {
			var qe *Error
			if !asError(err, &qe) || qe.Param != "filter" || qe.Pos < 0 || qe.Pos > len(s)+1 {
				t.Fatalf("%q: error %v has no parameter or position in range", s, err)
			}
			return
		}
		flt.Match(rec) // never panics
		if len(flt) != 1 || len(flt[0]) == 0 {
			t.Fatalf("%q: parsed into %d clauses", s, len(flt))
		}
	})
}

func FuzzParseSortAndFields(f *testing.F) {
	for _, s := range []string{"-restarts,name", "status.phase", `metadata.labels.app\.kubernetes\.io/name`} {
		f.Add(s)
	}
	raw := web0.json()
	f.Fuzz(func(t *testing.T, s string) {
		if keys, err := pods.ParseSort(s); err == nil {
			SortValues(keys, web0.record())
		}
		if p, err := ParseFields(s); err == nil && p != nil {
			out := p.Apply(nil, raw)
			if !json.Valid(out) {
				t.Fatalf("fields=%q: invalid JSON %s", s, out)
			}
		}
	})
}

// TestProjectionColumns: a column in fields= is its cell as kubectl
// prints it, under "columns", in the order asked, beside the projected
// members; a leading "." keeps a member of the same name; the object's
// own "columns" member cannot be kept beside them.
func TestProjectionColumns(t *testing.T) {
	for _, tc := range []struct{ given, expect string }{
		{"restarts,STATUS,ready,.status.phase", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"a","uid":"u-web-0","resourceVersion":"7"},"status":{"phase":"Running"},` +
			`"columns":{"restarts":"5","status":"Running","ready":"1/2"}}`},
		{"age,namespace,name,node,ip,restarts", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"a","uid":"u-web-0","resourceVersion":"7"},` +
			`"columns":{"age":"90m","namespace":"a","name":"web-0","node":"n1","ip":"10.0.0.1","restarts":"5"}}`},
		{"spec.nodeName", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"a","uid":"u-web-0","resourceVersion":"7"},"spec":{"nodeName":"n1"}}`},
		{".columns", `{"kind":"Pod","apiVersion":"v1","metadata":{"name":"web-0","namespace":"a","uid":"u-web-0","resourceVersion":"7"}}`},
	} {
		p, err := pods.ParseFields(tc.given, now)
		if err != nil {
			t.Fatalf("fields=%s: %v", tc.given, err)
		}
		if got := string(p.Apply(nil, web0.json())); got != tc.expect {
			t.Errorf("fields=%s:\nexpect %s\ngot    %s", tc.given, tc.expect, got)
		}
	}
	for _, tc := range []struct{ given, expect string }{
		{"restarts,columns.x", `fields: at position 10: the object's own "columns" member cannot be kept`},
		{"status,spec.containers.#.image", `fields: at position 8: path "spec.containers.#.image"`},
	} {
		_, err := pods.ParseFields(tc.given, now)
		if err == nil || !strings.HasPrefix(err.Error(), tc.expect) {
			t.Errorf("fields=%s: %v; expect %q", tc.given, err, tc.expect)
		}
	}
}

func FuzzParseFieldsColumns(f *testing.F) {
	for _, s := range []string{"restarts,status", ".status,age", "columns,ready", `metadata.labels.app\.kubernetes\.io/name,ip`} {
		f.Add(s)
	}
	raw := web0.json()
	f.Fuzz(func(t *testing.T, s string) {
		p, err := pods.ParseFields(s, now)
		if err != nil {
			var qe *Error
			if !asError(err, &qe) || qe.Param != "fields" || qe.Pos < 0 || qe.Pos > len(s)+1 {
				t.Fatalf("%q: error %v has no parameter or position in range", s, err)
			}
			return
		}
		if p == nil {
			return
		}
		var out map[string]any
		if err := json.Unmarshal(p.Apply(nil, raw), &out); err != nil {
			t.Fatalf("fields=%q: invalid JSON: %v", s, err)
		}
	})
}
