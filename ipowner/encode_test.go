package ipowner

import (
	"encoding/json"
	"testing"
	"time"
)

// The wire format of each answer's owners: the structs encoding/json
// encoded them from before the encoders were written by hand, and the
// JSON every client reads.
type (
	wirePod struct {
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Phase       string `json:"phase"`
		NodeName    string `json:"nodeName,omitempty"`
		HostNetwork bool   `json:"hostNetwork"`
		Active      bool   `json:"active"`
	}
	wireService struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		UID       string `json:"uid"`
		Role      Role   `json:"role"`
	}
	wireNode struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
		Role Role   `json:"role"`
	}
	wireInterval struct {
		Kind        string    `json:"kind"`
		Namespace   string    `json:"namespace,omitempty"`
		Name        string    `json:"name"`
		UID         string    `json:"uid"`
		Role        Role      `json:"role"`
		HostNetwork bool      `json:"hostNetwork,omitempty"`
		From        time.Time `json:"from"`
		To          time.Time `json:"to,omitzero"`
		Since       string    `json:"since,omitempty"`
	}
	wireStreamOwner struct {
		Kind        string `json:"kind"`
		Namespace   string `json:"namespace,omitempty"`
		Name        string `json:"name"`
		UID         string `json:"uid"`
		Role        Role   `json:"role"`
		HostNetwork bool   `json:"hostNetwork,omitempty"`
		NodeName    string `json:"nodeName,omitempty"`
	}
)

func wirePods(pods []Owner) []wirePod {
	if pods == nil {
		return nil
	}
	out := []wirePod{}
	for _, p := range pods {
		out = append(out, wirePod{p.Namespace, p.Name, p.UID, p.Phase, p.NodeName, p.HostNetwork, p.Active()})
	}
	return out
}

// checkOwnerEncodings holds every hand-written encoding of o to
// encoding/json's of its wire struct.
func checkOwnerEncodings(t *testing.T, o Owner, from, to time.Time, since string) {
	t.Helper()
	check := func(what string, got []byte, v any) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", what, got, want)
		}
	}
	o.Kind = Pod
	check("pods", AppendPods(nil, []Owner{o, o}), wirePods([]Owner{o, o}))
	o.Kind = Service
	check("services", appendHolderEntry(nil, 0, &o), wireService{o.Namespace, o.Name, o.UID, o.Role})
	o.Kind = Node
	check("nodes", appendHolderEntry(nil, 0, &o), wireNode{o.Name, o.UID, o.Role})
	for _, k := range Kinds {
		o.Kind = k
		iv := Interval{Owner: o, From: from, To: to, Since: since}
		check("interval", AppendInterval(nil, &iv), wireInterval{k.String(), o.Namespace, o.Name, o.UID, o.Role, o.HostNetwork, from.UTC(), to.UTC(), since})
		check("stream owner", AppendStreamOwner(nil, &o), wireStreamOwner{k.String(), o.Namespace, o.Name, o.UID, o.Role, o.HostNetwork, o.NodeName})
	}
}

// TestOwnerEncodings: each answer's owners are encoded by hand as
// encoding/json encodes their wire structs, for owners shaped every way
// that matters (members empty, characters to escape, bad UTF-8).
func TestOwnerEncodings(t *testing.T) {
	from := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	for _, o := range []Owner{
		{Namespace: "shop", Name: "web-0", UID: "u1", Role: RolePodIP, Phase: "Running", NodeName: "node-1"},
		{Name: "n1", UID: "u2", Role: RoleNodeInternal, HostNetwork: true, Phase: "Succeeded"},
		{Namespace: "tab\there", Name: "quote\"back\\slash", UID: "\x00\x1f\x7f", Role: "<&>", Phase: "héllo", NodeName: "bad \xff utf-8"},
	} {
		checkOwnerEncodings(t, o, from, time.Time{}, "")
		checkOwnerEncodings(t, o, from, from.Add(time.Second), "start")
	}
	if got := string(appendHolders(nil, nil, nil, nil)); got != `,"pods":[]` {
		t.Errorf("no holders: %s", got)
	}
}

func FuzzOwnerEncodings(f *testing.F) {
	f.Add("ns", "name", "uid", "podIP", "Running", "node", true, int64(5), int64(0), "")
	f.Add("\u2028", "\"\\", "\x00", "\xff\xfe", "é", "\t\n", false, int64(-1), int64(1e18), "creation")
	f.Fuzz(func(t *testing.T, ns, name, uid, role, phase, node string, host bool, from, to int64, since string) {
		o := Owner{Namespace: ns, Name: name, UID: uid, Role: Role(role), Phase: phase, NodeName: node, HostNetwork: host}
		var end time.Time
		if to != 0 {
			end = time.Unix(0, to)
		}
		checkOwnerEncodings(t, o, time.Unix(0, from), end, since)
	})
}

// BenchmarkIPPodsEncoding runs the hand-written encoding of a lookup's
// pods beside encoding/json's encoding of the same values (which
// TestOwnerEncodings holds them to). ARCHITECTURE.md quotes it:
//
//	go test -run XXX -bench IPPodsEncoding -benchtime 20000x ./ipowner
func BenchmarkIPPodsEncoding(b *testing.B) {
	pods := []Owner{
		{Kind: Pod, Namespace: "media", Name: "web-7d9f8b6c5-x2x9k", Phase: "Running", UID: "0f9c1b6e-3a55-4d2b-9a8e-2f1c4b7d9e01", NodeName: "node-1"},
		{Kind: Pod, Namespace: "media", Name: "web-7d9f8b6c5-abcde", UID: "7b2e9d41-c0a3-4f6e-8d15-a9b8c7d6e5f4", Phase: "Succeeded", NodeName: "node-2"},
	}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = AppendPods(buf[:0], pods)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		wire := wirePods(pods)
		for b.Loop() {
			if _, err := json.Marshal(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
}
