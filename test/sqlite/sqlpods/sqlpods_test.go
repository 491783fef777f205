package sqlpods

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// The Table in testdata is kubeindex's own answer (internal/table's cells)
// to a Table list of the demo's pods with includeObject=Object: pending
// pods without an IP, restarts "1 (8s ago)", READY 0/2.
func readTestTable(t *testing.T) []Row {
	t.Helper()
	f, err := os.Open("testdata/pods-table.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, cont, err := ReadTable(f)
	if err != nil {
		t.Fatal(err)
	}
	if cont != "" || len(rows) != 12 {
		t.Fatalf("%d rows, continue %q; expect the 12 rows of the file", len(rows), cont)
	}
	return rows
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// TestReadTable: the rows hold the Table's cells typed as kubeindex's
// questions compare them.
func TestReadTable(t *testing.T) {
	rows := readTestTable(t)
	got := map[string]string{}
	for _, r := range rows {
		got[r.Key()] = fmt.Sprintf("%s %s %.2f %d %s %s created=%d obj=%t", str(r.Phase), r.Status, r.Ready, r.Restarts,
			str(r.IP), str(r.Node), r.Created, strings.Contains(string(r.Object), `"name":"`+r.Name+`"`))
	}
	for key, want := range map[string]string{
		"kube-system/coredns-k8ckbqk9l7-2phn7": "Pending ContainerCreating 0.00 0 <nil> node-6 created=1795738838 obj=true",
		"kube-system/kube-proxy-sb5g5":         "Running Running 1.00 1 10.0.0.15 node-5 created=1795738793 obj=true",
		"payments/web-h46rkztqjg-cmtv4":        "Running Running 1.00 2 10.244.1.6 node-1 created=1795738793 obj=true",
	} {
		if got[key] != want {
			t.Errorf("%s: %q; expect %q", key, got[key], want)
		}
	}
}

// TestReadTableRefuses: a Table without its objects or with a cell of
// the wrong shape is an error, not a row of zeros.
func TestReadTableRefuses(t *testing.T) {
	b, err := os.ReadFile("testdata/pods-table.json")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"no objects":   func(s string) string { return strings.Replace(s, `"object":{`, `"object":null,"x":{`, 1) },
		"bad ready":    func(s string) string { return strings.Replace(s, `"2/2"`, `"two"`, 1) },
		"bad restarts": func(s string) string { return strings.Replace(s, `"1 (8s ago)"`, `"x (8s ago)"`, 1) },
		"no IP column": func(s string) string { return strings.Replace(s, `{"name":"IP"`, `{"name":"Address"`, 1) },
	} {
		t.Run(name, func(t *testing.T) {
			edited := edit(string(b))
			if edited == string(b) {
				t.Fatal("the edit changed nothing")
			}
			if _, _, err := ReadTable(strings.NewReader(edited)); err == nil {
				t.Error("no error")
			}
		})
	}
}

// oraclePage is kubeindex's semantics of a question, computed in Go:
// filter, sort (no value last in either direction), ties by namespace and
// name.
func oraclePage(rows []Row, q Question, offset, limit int) Page {
	var match []Row
	for _, r := range rows {
		switch q.Name {
		case "running by restarts":
			if str(r.Phase) == "Running" {
				match = append(match, r)
			}
		case "running by node (columns)":
			if r.Status == "Running" {
				match = append(match, r)
			}
		}
	}
	slices.SortFunc(match, func(a, b Row) int {
		var c int
		switch q.Name {
		case "running by restarts":
			c = cmp.Compare(b.Restarts, a.Restarts)
		case "running by node (columns)":
			switch {
			case a.Node == nil && b.Node == nil:
			case a.Node == nil:
				c = 1
			case b.Node == nil:
				c = -1
			default:
				c = strings.Compare(*a.Node, *b.Node)
			}
		}
		return cmp.Or(c, strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	p := Page{Total: len(match)}
	for _, r := range match[min(offset, len(match)):min(offset+limit, len(match))] {
		p.Keys = append(p.Keys, r.Key())
	}
	return p
}

// TestStoreAgrees: SQLite's pages and counts are the Go oracle's, over the
// Table's rows and rows with no node and many ties; each page is a walk of
// an index, not a sort of every match.
func TestStoreAgrees(t *testing.T) {
	rows := readTestTable(t)
	node := "node-0"
	for i := range 40 { // ties on restarts and node, and pods with no node
		r := Row{Namespace: fmt.Sprintf("ns-%d", i%3), Name: fmt.Sprintf("p-%02d", 40-i), Status: "Running",
			Phase: rows[1].Phase, Restarts: int64(i % 4), Object: []byte(fmt.Sprintf(`{"i":%d}`, i))}
		if i%5 != 0 {
			r.Node = &node
		}
		rows = append(rows, r)
	}
	s, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if err := s.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := s.Index(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range Questions {
		for _, offset := range []int{0, 5, 17, 40, 60} {
			got, err := s.Page(ctx, q, offset, 10)
			if err != nil {
				t.Fatal(err)
			}
			want := oraclePage(rows, q, offset, 10)
			if got.Total != want.Total || !slices.Equal(got.Keys, want.Keys) {
				t.Errorf("%s at %d: total %d %v; expect %d %v", q.Name, offset, got.Total, got.Keys, want.Total, want.Keys)
			}
			if len(got.Objects) != len(got.Keys) {
				t.Errorf("%s at %d: %d objects for %d keys", q.Name, offset, len(got.Objects), len(got.Keys))
			}
		}
		plan, err := s.plan(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: SQLite sorts the matches: %s", q.Name, plan)
		}
		t.Logf("%s: %s", q.Name, plan)
	}
	total, groups, err := s.Counts(ctx, Counts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, r := range rows {
		want[str(r.Phase)+" "+str(r.Node)]++
	}
	got := map[string]int{}
	for i, g := range groups {
		got[str(g.Values[0])+" "+str(g.Values[1])] = g.Count
		if i > 0 && g.Count > groups[i-1].Count {
			t.Errorf("groups not largest first: %v", groups)
		}
	}
	if total != len(rows) || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts: total %d %v; expect %d %v", total, got, len(rows), want)
	}
}
