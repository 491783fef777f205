package query

import (
	"fmt"
	"testing"
)

// TestFilterInCluster: a filter's terms on the cluster are decided per
// cluster, the rest left for the cluster to evaluate; a clause of cluster
// terms none of which holds rules the cluster out.
func TestFilterInCluster(t *testing.T) {
	across := pods.AcrossClusters()
	for _, tc := range []struct {
		filters []string
		cluster string
		match   bool
		local   string // the local filter's terms, clause by clause
	}{
		{[]string{"cluster=east"}, "east", true, "[]"},
		{[]string{"cluster=east"}, "west", false, ""},
		{[]string{"cluster!=east", "status=Running"}, "west", true, "[[status]]"},
		{[]string{"cluster in (a,b)"}, "b", true, "[]"},
		{[]string{"cluster notin (a,b)"}, "b", false, ""},
		{[]string{"cluster=east,status=Failed"}, "west", true, "[[status]]"},
		{[]string{"cluster=east,status=Failed"}, "east", true, "[]"},
		{[]string{"cluster~as"}, "east", true, "[]"},
		{[]string{".cluster=east"}, "west", true, "[[.cluster]]"},
	} {
		f, err := across.ParseFilter(tc.filters, now)
		if err != nil {
			t.Fatalf("%q: %v", tc.filters, err)
		}
		local, match := f.InCluster(tc.cluster)
		if match != tc.match || (match && keysOf(local) != tc.local) {
			t.Errorf("%q in %s: match %v local %s; expect %v %s", tc.filters, tc.cluster, match, keysOf(local), tc.match, tc.local)
		}
	}
	// Read without AcrossClusters, cluster is a path.
	if k, err := pods.Key("cluster"); err != nil || k.IsCluster() || k.Path() != "cluster" {
		t.Errorf("cluster on one cluster's schema: %+v %v; expect the path", k, err)
	}
}

func keysOf(f Filter) string {
	out := make([][]string, len(f))
	for i, cl := range f {
		for _, t := range cl {
			out[i] = append(out[i], t.Key.String())
		}
	}
	return fmt.Sprint(out)
}

// TestSortAndGroupsAcrossClusters: each cluster sorts and groups by the
// keys but cluster; the merge puts the cluster's name back in place.
func TestSortAndGroupsAcrossClusters(t *testing.T) {
	across := pods.AcrossClusters()
	sort, err := across.ParseSort("-restarts,cluster,name")
	if err != nil {
		t.Fatal(err)
	}
	local := Local(sort)
	if SortText(local) != "-restarts,name" {
		t.Errorf("local sort %q; expect -restarts,name", SortText(local))
	}
	vs := ClusterValues(sort, "east", []Value{Num(3), Text("web-0")})
	if fmt.Sprint(vs) != fmt.Sprint([]Value{Num(3), Text("east"), Text("web-0")}) {
		t.Errorf("values %v; expect 3, east, web-0", vs)
	}
	keys, err := across.ParseKeys("groupBy", "cluster,status", MaxGroupBy, false)
	if err != nil {
		t.Fatal(err)
	}
	if lk := LocalKeys(keys); len(lk) != 1 || lk[0].String() != "status" {
		t.Errorf("local group keys %v; expect status", lk)
	}
	if vs := ClusterValues(keys, "west", []Value{Text("Running")}); fmt.Sprint(vs) != fmt.Sprint([]Value{Text("west"), Text("Running")}) {
		t.Errorf("group values %v; expect west, Running", vs)
	}
}
