package ipowner

import (
	"strings"
	"testing"
	"time"
)

func newTestMirror() *Mirror {
	return NewMirror(time.Now, MirrorOptions{HistorySize: 100, HistoryAge: time.Hour, BookmarkInterval: time.Hour})
}

// drain reads every ready message as "KIND raw-or-position".
func drain(s *MirrorSub) []string {
	var out []string
	for {
		m, ok := s.Next()
		if !ok {
			return out
		}
		switch m.Kind {
		case StreamOwners, StreamReset:
			out = append(out, string(m.Raw))
		case StreamSynced:
			out = append(out, "SYNCED")
		case StreamBookmark:
			out = append(out, "BOOKMARK")
		case StreamEnded:
			out = append(out, "ENDED "+m.Reason)
		}
	}
}

// TestMirrorStreamsOwnerSets: given a mirror fed a pod and a Service
// sharing an address, when a subscriber opens, then it gets the address
// with both owners, SYNCED, then each change of the owner set as its
// filter sees it (a change it cannot see is none); a resume from a
// position replays what came after it, no snapshot; a position of
// another mirror opens with RESET and a snapshot; a subscriber that falls
// behind its queue is ended.
func TestMirrorStreamsOwnerSets(t *testing.T) {
	m := newTestMirror()
	pod := Holding{Owner: Owner{Kind: Pod, Namespace: "a", Name: "web", UID: "p1", NodeName: "n1", Phase: "Running"},
		Held: []Held{{"10.0.0.1", RolePodIP}}}
	svc := Holding{Owner: Owner{Kind: Service, Namespace: "a", Name: "lb", UID: "s1"},
		Held: []Held{{"10.0.0.1", RoleExternalIP}}, Ports: []Port{{80, "TCP"}}}
	m.Observe(pod)
	m.Observe(svc)

	all, err := m.Subscribe(MirrorQuery{Kinds: Kinds[:], QueueSize: 10}, make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := m.Subscribe(MirrorQuery{Kinds: []Kind{Pod}, QueueSize: 10}, make(chan struct{}, 1))
	got := drain(all)
	want := []string{`{"type":"OWNERS","ip":"10.0.0.1","owners":[{"kind":"Pod","namespace":"a","name":"web","uid":"p1","role":"podIP","nodeName":"n1"},` +
		`{"kind":"Service","namespace":"a","name":"lb","uid":"s1","role":"externalIP"}]}`, "SYNCED"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("snapshot:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	drain(pods)
	synced := m.position(m.log.Head())

	pod.Owner.Phase = "Pending" // not part of what the stream says: no change
	m.Observe(pod)
	svc.Held = nil // the Service lets the address go
	m.Observe(svc)
	if got := drain(all); len(got) != 1 || !strings.Contains(got[0], `"owners":[{"kind":"Pod"`) || strings.Contains(got[0], "Service") {
		t.Errorf("the Service's release: %q; want one change, the pod alone", got)
	}
	if got := drain(pods); len(got) != 0 {
		t.Errorf("a change only of Services, to a pods' subscriber: %q; want none", got)
	}

	resumed, err := m.Subscribe(MirrorQuery{Kinds: Kinds[:], Position: synced, QueueSize: 10}, make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(resumed); len(got) != 2 || !strings.Contains(got[0], `"resourceVersion"`) || got[1] != "SYNCED" {
		t.Errorf("a resume: %q; want the one change after the position, then SYNCED", got)
	}
	foreign, _ := m.Subscribe(MirrorQuery{Kinds: Kinds[:], Position: newTestMirror().position(1), QueueSize: 10}, make(chan struct{}, 1))
	if got := drain(foreign); len(got) != 3 || !strings.HasPrefix(got[0], `{"type":"RESET"`) || got[2] != "SYNCED" {
		t.Errorf("another mirror's position: %q; want RESET, the snapshot, SYNCED", got)
	}
	if _, err := m.Subscribe(MirrorQuery{Kinds: Kinds[:], Position: "12", QueueSize: 10}, nil); err == nil {
		t.Error("a position that is not one was taken")
	}

	slow, _ := m.Subscribe(MirrorQuery{Kinds: Kinds[:], QueueSize: 1}, make(chan struct{}, 1))
	for _, ip := range []string{"10.0.0.2", "10.0.0.3"} {
		m.Observe(Holding{Owner: Owner{Kind: Node, Name: ip, UID: ip}, Held: []Held{{ip, RoleNodeInternal}}})
	}
	if got := drain(slow); len(got) == 0 || !strings.HasPrefix(got[len(got)-1], "ENDED") {
		t.Errorf("a subscriber behind its queue: %q; want it ended", got)
	}
	if st := m.Stats(); st.Dropped != 1 || st.Subscribers != 4 {
		t.Errorf("stats %+v; want the slow one dropped, four left", st)
	}
}
