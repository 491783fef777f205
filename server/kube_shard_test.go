package server

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
)

// shardSelectors splits the hash space into n equal ranges over field.
func shardSelectors(field string, n int) []string {
	out := make([]string, n)
	step := ^uint64(0)/uint64(n) + 1
	for i := range n {
		start := fmt.Sprintf("0x%016x", uint64(i)*step)
		end := "0x10000000000000000"
		if i < n-1 {
			end = fmt.Sprintf("0x%016x", uint64(i+1)*step)
		}
		out[i] = fmt.Sprintf("shardRange(%s, '%s', '%s')", field, start, end)
	}
	return out
}

// TestKubeShardSelector: N shard selectors partition a list (every pod in
// exactly one shard, the one its UID's hash falls in, and the list says
// which shard it is) and a watch's events, over the UID and over the
// namespace; bad selectors get the API server's parse errors as 400s.
func TestKubeShardSelector(t *testing.T) {
	f, srv := startKube(t)
	ctx := context.Background()
	for _, proto := range []bool{false, true} {
		cfg := &restclient.Config{Host: srv.URL + "/k8s", ContentConfig: restclient.ContentConfig{ContentType: "application/json"}}
		if proto {
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
		}
		client := kubernetes.NewForConfigOrDie(cfg)
		all, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range []string{"object.metadata.uid", "object.metadata.namespace"} {
			seen := map[string]int{}
			for i, sel := range shardSelectors(field, 4) {
				parsed := sharding.NewSelector(sharding.ShardRangeRequirement{Key: field,
					Start: strings.Split(sel, "'")[1], End: strings.Split(sel, "'")[3]})
				l, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ShardSelector: sel})
				if err != nil {
					t.Fatal(err)
				}
				if l.ShardInfo == nil || l.ShardInfo.Selector != sel {
					t.Errorf("shard %d: shardInfo %+v", i, l.ShardInfo)
				}
				for _, p := range l.Items {
					seen[string(p.UID)]++
					if ok, _ := parsed.Matches(&p); !ok {
						t.Errorf("%s/%s in shard %d of %s", p.Namespace, p.Name, i, field)
					}
				}
			}
			for _, p := range all.Items {
				if seen[string(p.UID)] != 1 {
					t.Errorf("%s: %s/%s in %d shards", field, p.Namespace, p.Name, seen[string(p.UID)])
				}
			}
			if len(seen) != len(all.Items) {
				t.Errorf("%s: %d pods in the shards, %d in the list", field, len(seen), len(all.Items))
			}
		}
	}

	client := kubernetes.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s"})
	sels := shardSelectors("object.metadata.uid", 2)
	var watches [2]watch.Interface
	for i, sel := range sels {
		w, err := client.CoreV1().Pods("shard-test").Watch(ctx, metav1.ListOptions{ShardSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		watches[i] = w
	}
	const n = 20
	for i := range n {
		applyPod(t, f, "shard-test", fmt.Sprintf("p-%d", i), "node-1", nil)
	}
	got := map[string]int{}
	deadline := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case ev := <-watches[0].ResultChan():
			got[ev.Object.(metav1.Object).GetName()] += 1
		case ev := <-watches[1].ResultChan():
			got[ev.Object.(metav1.Object).GetName()] += 100
		case <-deadline:
			t.Fatalf("%d of %d pods seen: %v", len(got), n, got)
		}
	}
	time.Sleep(100 * time.Millisecond) // a pod delivered to both shards would show now
	for len(watches[0].ResultChan())+len(watches[1].ResultChan()) > 0 {
		select {
		case ev := <-watches[0].ResultChan():
			got[ev.Object.(metav1.Object).GetName()] += 1
		case ev := <-watches[1].ResultChan():
			got[ev.Object.(metav1.Object).GetName()] += 100
		}
	}
	var per [2]int
	for name, v := range got {
		switch v {
		case 1:
			per[0]++
		case 100:
			per[1]++
		default:
			t.Errorf("%s: delivered %d times to shard 0 and %d to shard 1", name, v%100, v/100)
		}
	}
	if per[0] == 0 || per[1] == 0 {
		t.Errorf("shards of %d and %d pods", per[0], per[1])
	}

	for _, c := range []struct{ sel, msg string }{
		{"shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')", "unsupported field path"},
		{"shardRange(object.metadata.uid, '0x0', '0x8000000000000000')", "hexStart must be a 0x-prefixed 16-digit hex value"},
		{"shardRange(object.metadata.uid, '0x8000000000000000', '0x0000000000000000')", "must be less than end"},
		{"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') && true", "unsupported function"},
		{"shardRange(object.metadata.uid", "CEL parse error"},
		{" ", "empty shard selector is not allowed"},
		{"shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')", "all shard ranges must use the same field"},
	} {
		for _, watch := range []string{"", "&watch=true"} {
			rec := kubeDo(t, srv.Config.Handler, "GET", "/k8s/api/v1/pods?shardSelector="+url.QueryEscape(c.sel)+watch, "")
			if rec.Code != 400 || !strings.Contains(rec.Body.String(), "invalid shard selector: ") || !strings.Contains(rec.Body.String(), c.msg) {
				t.Errorf("%q%s: %d %s", c.sel, watch, rec.Code, rec.Body.String())
			}
		}
	}
}
