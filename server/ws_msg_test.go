package server

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/kubeindex/kubeindex/cache"
)

func TestParseClientMessage(t *testing.T) {
	tests := []struct {
		msg   string
		valid bool
		want  cache.WatchQuery
	}{
		{`{"op":"subscribe","id":"t1","resource":"pods"}`, true, cache.WatchQuery{Snapshot: true}},
		{`{"op":"subscribe","id":"t1","resource":"pods","namespace":"ns","labelSelector":"app=web","index":"node","value":"n1","diff":"merge"}`,
			true, cache.WatchQuery{Namespace: "ns", LabelSelector: "app=web", Index: "node", Value: "n1", Snapshot: true, Diff: cache.MergePatch}},
		{`{"op":"subscribe","id":"t1","resource":"pods","resourceVersion":"42"}`, true, cache.WatchQuery{ResourceVersion: "42"}},
		{`{"op":"subscribe","id":"t1","resource":"pods","snapshot":false}`, true, cache.WatchQuery{}},
		{` {"op":"unsubscribe","id":"t1"} `, true, cache.WatchQuery{}},
		{`{"op":"unsubscribe","id":"t1","resource":"pods"}`, false, cache.WatchQuery{}},
		{`{"op":"subscribe","id":"","resource":"pods"}`, false, cache.WatchQuery{}},
		{`{"op":"subscribe","id":"` + strings.Repeat("x", 129) + `","resource":"pods"}`, false, cache.WatchQuery{}},
		{`{"op":"subscribe","id":"t1","Resource":"pods"}`, false, cache.WatchQuery{}},
		{`{"op":"subscribe","id":"t1","resource":"pods","diff":"MERGE"}`, false, cache.WatchQuery{}},
		{`{"op":"subscribe","id":"t1","resource":"pods","snapshot":null,"extra":1}`, false, cache.WatchQuery{}},
		{`{"op":"window","id":"w","resource":"pods","filter":["a=1","b>2"],"sort":"-restarts","offset":0,"limit":10,"fields":"x","groupBy":"status","resume":"r.1","fieldSelector":"spec.nodeName=n"}`, true, cache.WatchQuery{}},
		{`{"op":"window","id":"w"}`, false, cache.WatchQuery{}},
		{`{"op":"window","id":"w","resource":"pods","diff":"merge"}`, false, cache.WatchQuery{}},
		{`{"op":"window","id":"w","resource":"pods","limit":"10"}`, false, cache.WatchQuery{}},
		{`{"op":"scroll","id":"w","offset":3,"limit":10}`, true, cache.WatchQuery{}},
		{`{"op":"scroll","id":"w","limit":10}`, false, cache.WatchQuery{}},
		{`{"op":"scroll","id":"w","offset":3,"sort":"name"}`, false, cache.WatchQuery{}},
		{`{"op":"subscribe","id":"t1","resource":"pods","filter":["a=1"]}`, false, cache.WatchQuery{}},
		{`null`, false, cache.WatchQuery{}},
		{``, false, cache.WatchQuery{}},
	}
	for _, tt := range tests {
		m, err := parseClientMessage([]byte(tt.msg))
		if (err == nil) != tt.valid {
			t.Errorf("%.80s: err %v; expect valid=%v", tt.msg, err, tt.valid)
			continue
		}
		if err == nil && m.Op == "subscribe" {
			if q, _ := m.watchQuery(); !reflect.DeepEqual(q, tt.want) {
				t.Errorf("%.80s: query %+v; expect %+v", tt.msg, q, tt.want)
			}
		}
	}
}

// FuzzParseClientMessage: whatever arrives, the parser neither panics nor
// accepts something invalid, and the ERROR answer is valid JSON.
func FuzzParseClientMessage(f *testing.F) {
	for _, s := range []string{
		`{"op":"subscribe","id":"t1","resource":"pods","namespace":"ns","labelSelector":"app=web","index":"node","value":"n1","resourceVersion":"5","snapshot":false,"diff":"jsonpatch"}`,
		`{"op":"unsubscribe","id":"t1"}`,
		`{"op":"subscribe","id":"t1","resource":"pods","snapshot":"yes"}`,
		`{"op":"subscribe","id":"\u00e9\ud800","resource":"pods"}`,
		`{"op":"subscribe","id":"a","ID":"b","resource":"pods"}`,
		`{"op":"subscribe","id":"a","resource":"ip:watch","kinds":"pods,nodes","node":"node-1","resourceVersion":"x-1"}`,
		`{"op":"subscribe","id":"a","resource":"ip:watch","diff":"merge"}`,
		`{"op":"subscribe","id":"a","resource":"pods","kinds":"pods"}`,
		`{"op":"window","id":"w","resource":"pods","filter":["status!=Running"],"sort":"-restarts","offset":0,"limit":100,"fields":"status.phase","groupBy":"status,node","resume":"x.1"}`,
		`{"op":"scroll","id":"w","offset":200,"limit":100}`,
		`[{"op":"subscribe"}]`, `{}`, `{"id":1}`, "\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseClientMessage(data)
		if err != nil {
			out := errorMessage(m.ID, err)
			if !json.Valid(out) || gjson.GetBytes(out, "type").Str != "ERROR" || gjson.GetBytes(out, "code").Int() != 400 {
				t.Fatalf("error message %s", out)
			}
			return
		}
		if !validID(m.ID) || !slices.Contains([]string{"subscribe", "unsubscribe", "window", "scroll"}, m.Op) ||
			(m.Op == "subscribe" || m.Op == "window") && m.Resource == "" || m.Op == "scroll" && m.Offset == nil {
			t.Fatalf("accepted %q as %+v", data, m)
		}
		if _, err := m.watchQuery(); m.Op == "subscribe" && err != nil {
			t.Fatalf("accepted %q with an invalid query: %v", data, err)
		}
		// What was accepted means the same once re-encoded.
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := parseClientMessage(again)
		if err != nil || m2.Op != m.Op || m2.ID != m.ID || m2.Resource != m.Resource {
			t.Fatalf("%q re-encoded as %s: %+v %v", data, again, m2, err)
		}
	})
}
