package cache

import (
	"fmt"
	"testing"
)

func podObject(t *testing.T, name, phase string, hostNetwork bool) *Object {
	t.Helper()
	o, err := NewObject(fmt.Appendf(nil, `{"metadata":{"namespace":"shop","name":%q,"uid":"u-%s"},`+
		`"spec":{"nodeName":"node-1","hostNetwork":%t},"status":{"phase":%q,"podIP":"10.0.0.1"}}`,
		name, name, hostNetwork, phase), "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestPodSummaryMemo checks that memoised summaries are those of the very
// object asked about: an update is a new object, and is summarised anew.
func TestPodSummaryMemo(t *testing.T) {
	memo := summaryMemo{max: 2}
	running := podObject(t, "web-0", "Running", false)
	for range 2 {
		if got, want := memo.get(running), summarisePod(running); got != want {
			t.Fatalf("memoised %+v; expect %+v", got, want)
		}
	}
	done := podObject(t, "web-0", "Succeeded", false) // the same pod, updated
	if got := memo.get(done); got.Phase != "Succeeded" || got.Active {
		t.Errorf("after an update: %+v; expect the new phase, inactive", got)
	}
	if got := memo.get(running); got.Phase != "Running" || !got.Active {
		t.Errorf("the old object: %+v; expect its own summary", got)
	}
	host := podObject(t, "proxy", "Running", true)
	if got := memo.get(host); !got.HostNetwork || got.NodeName != "node-1" || got.UID != "u-proxy" {
		t.Errorf("%+v; expect hostNetwork on node-1", got)
	}
	if len(memo.m) > memo.max {
		t.Errorf("%d entries; the memo holds at most %d", len(memo.m), memo.max)
	}
}
