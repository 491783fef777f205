package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
	"github.com/kubeindex/kubeindex/ipowner"
)

// TestSyncWaitsForTheFeedAhead: the initial list's address feed runs on a
// goroutine of its own (the feed ahead) while the handler goes on; until
// it is done the cache is not synced, whatever the informers say: no
// lookup answers, WaitForSync waits. Once it is, every address answers
// what a scan of the stores answers.
func TestSyncWaitsForTheFeedAhead(t *testing.T) {
	f := cachetest.NewWith(t, cachetest.Config{Pods: 300}, cachetest.DefaultSpecs()...)
	release := make(chan struct{})
	var held atomic.Bool
	f.Cache.HoldFeedAhead("pods", func() {
		held.Store(true)
		<-release
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Cache.Start(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	cachetest.Eventually(t, "the pods' feed ahead to start", held.Load)
	cachetest.Eventually(t, "the pods' informer to sync", func() bool { return f.Cache.InformersSynced("pods") })
	if f.Cache.Ready() {
		t.Fatal("ready while the feed ahead has not fed the list")
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if f.Cache.WaitForSync(short) {
		t.Fatal("WaitForSync returned synced while the feed ahead has not fed the list")
	}
	if _, err := f.Cache.LookupAddress(ipowner.Query{IP: "10.0.0.1"}); !errors.Is(err, cache.ErrNotSynced) {
		t.Fatalf("a lookup while the feed ahead is held: %v, want ErrNotSynced", err)
	}
	close(release)
	if !f.Cache.WaitForSync(ctx) {
		t.Fatal("not synced once the feed ahead was released")
	}
	for _, ip := range f.Cache.StoreAddresses() {
		q := ipowner.Query{IP: ip}
		got, gotErr := f.Cache.LookupAddress(q)
		want, wantErr := f.Cache.ScanAddress(q)
		if d := cache.DiffAnswers(got, want); d != "" || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("%s: %s (errors %v, %v)", ip, d, gotErr, wantErr)
		}
	}
	if n := len(f.Cache.StoreAddresses()); n < 300 {
		t.Fatalf("%d addresses held, want at least the 300 pods'", n)
	}
}
