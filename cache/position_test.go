package cache_test

import (
	"context"
	"errors"
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
