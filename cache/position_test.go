package cache_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// A position asked for while the cache syncs must not start the stream
// history before the broker holds the initial list: else a watch resumed
// from a version older than the list (a client of a kubeindex that
// restarted) is served the list as new events, and never learns of what
// was deleted meanwhile, instead of being refused.
func TestPositionBeforeSyncDoesNotStartHistory(t *testing.T) {
	f := cachetest.New(t, cachetest.PodSpec())
	if _, err := f.Cache.Position("pods"); !errors.Is(err, cache.ErrNotSynced) {
		t.Errorf("Position before sync: %v; expect cache.ErrNotSynced", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, reached, err := f.Cache.WaitPosition(ctx, "pods", 1); err != nil || reached {
		t.Errorf("WaitPosition before sync: reached %v, err %v; expect not reached", reached, err)
	}

	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Cache.Start(runCtx)
	}()
	t.Cleanup(func() { stop(); <-done })
	syncCtx, cancelSync := context.WithTimeout(runCtx, 30*time.Second)
	defer cancelSync()
	if !f.Cache.WaitForSync(syncCtx) {
		t.Fatal("cache did not sync")
	}

	notify := make(chan struct{}, 1)
	s, err := f.Cache.Watch("pods", cache.WatchQuery{ResourceVersion: "1"}, notify)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m, _ := s.Next(); m.Type != cache.ResyncRequired {
		t.Errorf("resume from 1, before the initial list: first message %s %s; expect RESYNC_REQUIRED", m.Type, m.ResourceVersion)
	}
	if _, expired := s.Expired(); !expired {
		t.Error("resume from before the initial list is not Expired")
	}
}

// A stream resumed on a lagging replica never repeats an event. The
// position a client brings is one another replica sent: this replica's
// reflector may have the event at that position while its handler has
// not yet handed it to the broker. WaitPosition must not call the
// position reached then: a subscription made at that moment would be
// handed the event it has already seen, once the handler gets to it.
func TestResumeOnALaggingReplicaNeverRepeats(t *testing.T) {
	f := cachetest.Start(t, cachetest.PodSpec())
	apply := func(name string) {
		t.Helper()
		if err := f.Sim.Apply("pods", fmt.Appendf(nil, `{"metadata":{"namespace":"lag","name":%q},"spec":{"containers":[{"name":"c","image":"x"}]}}`, name)); err != nil {
			t.Fatal(err)
		}
	}
	before, err := f.Cache.Position("pods")
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}, 1), make(chan struct{})
	f.Cache.HoldEvents("pods", func() {
		select {
		case held <- struct{}{}:
		default:
		}
		<-release
	})
	apply("seen-elsewhere") // another replica sent this event; its position is the client's
	<-held
	// The reflector has the event (its position moved); the handler holds it.
	var at uint64
	cachetest.Eventually(t, "the reflector has the event", func() bool {
		at = f.Cache.ListRV("pods")
		return at > before
	})
	resume := func(wait time.Duration) (cache.Subscription, bool) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, reached, err := f.Cache.WaitPosition(ctx, "pods", at); err != nil || !reached {
			return nil, false
		}
		s, err := f.Cache.Watch("pods", cache.WatchQuery{ResourceVersion: strconv.FormatUint(at, 10)}, make(chan struct{}, 1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s, true
	}
	early, reachedEarly := resume(100 * time.Millisecond)
	f.Cache.HoldEvents("pods", nil)
	close(release)
	s, ok := early, reachedEarly
	if !reachedEarly {
		if s, ok = resume(30 * time.Second); !ok {
			t.Fatalf("position %d not reached once the handler handed the event", at)
		}
	}
	apply("after")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		m, more := s.Next()
		if !more {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if m.Type == cache.Synced || m.Type == cache.Bookmark {
			continue
		}
		o := m.Object()
		if o == nil {
			t.Fatalf("resumed from %d: %s %s", at, m.Type, m.Reason)
		}
		if name := o.Key(); name != "lag/after" {
			t.Fatalf("resumed from %d (reached while the handler held the event: %v): %s %s, a repeat; expect lag/after first", at, reachedEarly, m.Type, name)
		}
		return
	}
	t.Fatal("no event after the resume")
}
