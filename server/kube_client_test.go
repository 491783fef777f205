package server

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// Real client-go informers with kubeindex's /k8s as their server: they
// sync and then follow changes, and hold exactly what the cache holds.

// storeState is namespace/name → resourceVersion of an informer's store.
func storeState(s toolscache.Store) map[string]string {
	out := map[string]string{}
	for _, o := range s.List() {
		m, err := metaOf(o)
		if err == nil {
			out[m.GetNamespace()+"/"+m.GetName()] = m.GetResourceVersion()
		}
	}
	return out
}

func metaOf(o any) (metav1.Object, error) {
	if m, ok := o.(metav1.Object); ok {
		return m, nil
	}
	return nil, fmt.Errorf("%T has no metadata", o)
}

func followsTheCache(t *testing.T, f *cachetest.Fixture, store toolscache.Store, q cache.ListQuery) {
	t.Helper()
	for i := range 5 {
		applyPod(t, f, "default", fmt.Sprintf("churn-%d", i), fmt.Sprintf("node-%d", 1+i%2), map[string]string{"round": "1"})
	}
	f.Sim.Delete("pods", "default", "churn-0")
	cachetest.Eventually(t, "the informer holds what the cache holds", func() bool {
		return maps.Equal(cachetest.State(t, f.Cache, "pods", q), storeState(store))
	})
}

func TestClientGoInformers(t *testing.T) {
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("typed, WatchListClient=%v", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			f := cachetest.Start(t, cachetest.DefaultSpecs()...)
			var lists atomic.Int64 // GETs of the pod collection that are not watches
			h := New(f.Cache, Options{Logger: quiet()}).Handler()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/k8s/api/v1/pods" && !r.URL.Query().Has("watch") {
					lists.Add(1)
				}
				h.ServeHTTP(w, r)
			}))
			defer srv.Close()
			client := kubernetes.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s"})
			factory := informers.NewSharedInformerFactory(client, 0)
			inf := factory.Core().V1().Pods().Informer()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			factory.Start(ctx.Done())
			defer func() { cancel(); factory.Shutdown() }()
			syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
			defer cancelSync()
			if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			followsTheCache(t, f, inf.GetStore(), cache.ListQuery{})
			if n := lists.Load(); watchList != (n == 0) {
				t.Errorf("%d lists; with WatchListClient the informer syncs from a watch alone", n)
			}
		})
	}

	t.Run("typed, a node's pods (the per-node agent)", func(t *testing.T) {
		f, srv := startKube(t)
		client := kubernetes.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s"})
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=node-1" }))
		inf := factory.Core().V1().Pods().Informer()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		factory.Start(ctx.Done())
		defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
		syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
		defer cancelSync()
		if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			t.Fatal("the informer did not sync")
		}
		followsTheCache(t, f, inf.GetStore(), cache.ListQuery{Index: "node", Value: "node-1"})
		for _, o := range inf.GetStore().List() {
			if n := o.(*corev1.Pod).Spec.NodeName; n != "node-1" {
				t.Fatalf("a pod of %s", n)
			}
		}
	})

	t.Run("dynamic", func(t *testing.T) {
		f, srv := startKube(t)
		client := dynamic.NewForConfigOrDie(&restclient.Config{Host: srv.URL + "/k8s"})
		factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
		inf := factory.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Informer()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		factory.Start(ctx.Done())
		defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
		syncCtx, cancelSync := context.WithTimeout(ctx, 30*time.Second)
		defer cancelSync()
		if !toolscache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
			t.Fatal("the informer did not sync")
		}
		followsTheCache(t, f, inf.GetStore(), cache.ListQuery{})
	})
}
