package cache_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// movingClock is a clock the test sets; safe for the informers' goroutines.
type movingClock struct{ ns atomic.Int64 }

func (c *movingClock) now() time.Time        { return time.Unix(0, c.ns.Load()) }
func (c *movingClock) set(t time.Time)       { c.ns.Store(t.UnixNano()) }
func (c *movingClock) after(d time.Duration) { c.ns.Add(int64(d)) }

func podWithIP(name, ip string) string {
	return fmt.Sprintf(`{"metadata":{"namespace":"reuse","name":%q},"spec":{"nodeName":"node-1","containers":[{"name":"c","image":"x"}]},`+
		`"status":{"phase":"Running","podIP":%q,"podIPs":[{"ip":%q}]}}`, name, ip, ip)
}

// TestHistoryThroughTheInformers: given pods that reuse an address (A, then
// B after A is deleted, then B deleted and recreated under its name), when
// moments before, between and after are asked, then each has its owner,
// by UID, as the informer events showed them.
func TestHistoryThroughTheInformers(t *testing.T) {
	clk := &movingClock{}
	clk.set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	f := cachetest.StartWith(t, cachetest.Config{Options: cache.Options{Now: clk.now}}, cachetest.DefaultSpecs()...)
	const x = "10.250.0.7"
	start := clk.now()
	uidOf := func() string {
		l, err := f.Cache.LookupIP(x)
		if err != nil {
			return ""
		}
		return l.Pods[0].UID
	}
	step := func(what string, change func() error, done func(uid string) bool) string {
		t.Helper()
		clk.after(10 * time.Second)
		if err := change(); err != nil {
			t.Fatal(err)
		}
		var uid string
		cachetest.Eventually(t, what, func() bool { uid = uidOf(); return done(uid) })
		return uid
	}
	uidA := step("A holds X", func() error { return f.Sim.Apply("pods", []byte(podWithIP("a", x))) }, func(u string) bool { return u != "" })
	step("A is gone", func() error { return f.Sim.Delete("pods", "reuse", "a") }, func(u string) bool { return u == "" })
	uidB := step("B holds X", func() error { return f.Sim.Apply("pods", []byte(podWithIP("b", x))) }, func(u string) bool { return u != "" })
	step("B is gone", func() error { return f.Sim.Delete("pods", "reuse", "b") }, func(u string) bool { return u == "" })
	uidB2 := step("B is back", func() error { return f.Sim.Apply("pods", []byte(podWithIP("b", x))) }, func(u string) bool { return u != "" })
	clk.after(10 * time.Second)

	tests := []struct {
		at   time.Duration // after start
		want string
	}{
		{-time.Second, "beforeHistory"},
		{5 * time.Second, "nobody"},
		{15 * time.Second, "exact " + uidA},
		{25 * time.Second, "nobody"},
		{35 * time.Second, "exact " + uidB},
		{50 * time.Second, "boundary " + uidB2},
		{55 * time.Second, "exact " + uidB2},
	}
	for _, tt := range tests {
		l, err := f.Cache.LookupAddress(ipowner.Query{IP: x, At: start.Add(tt.at)})
		got := ""
		switch {
		case errors.Is(err, ipowner.ErrBeforeHistory):
			got = "beforeHistory"
		case errors.Is(err, ipowner.ErrNotFound):
			got = "nobody"
		case err != nil:
			t.Fatal(err)
		default:
			var uids []string
			for _, o := range l.History.Owners {
				uids = append(uids, o.UID)
			}
			got = l.History.Certainty + " " + strings.Join(uids, " ")
		}
		if got != tt.want {
			t.Errorf("at +%s: %s; expect %s", tt.at, got, tt.want)
		}
	}
	if uidB == uidB2 {
		t.Error("the recreated pod kept its UID")
	}
	// A Service and a Node present at start-up: since their creation.
	l, err := f.Cache.LookupAddress(ipowner.Query{IP: "10.96.0.1", At: start.Add(time.Second)})
	if err != nil || l.Match != ipowner.MatchService || l.History.Owners[0].Since != "creation" || l.History.Owners[0].Kind != ipowner.Service {
		t.Errorf("the kubernetes Service at start-up: %+v %v", l.History, err)
	}
}
