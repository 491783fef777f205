package fakeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"
)

// httpListWatch is a client-go ListerWatcher over plain HTTP that decodes
// into unstructured objects, as client-go's dynamic client does.
type httpListWatch struct {
	base string // collection URL
}

// IsWatchListSemanticsUnSupported makes the reflector list then watch, as
// kubeindex's own ListerWatcher does: the server refuses the streaming
// watch-list protocol.
func (lw *httpListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *httpListWatch) get(ctx context.Context, opts metav1.ListOptions, watching bool) (*http.Response, error) {
	q := url.Values{}
	if opts.ResourceVersion != "" {
		q.Set("resourceVersion", opts.ResourceVersion)
	}
	if opts.ResourceVersionMatch != "" {
		q.Set("resourceVersionMatch", string(opts.ResourceVersionMatch))
	}
	if opts.Limit > 0 {
		q.Set("limit", fmt.Sprint(opts.Limit))
	}
	if opts.Continue != "" {
		q.Set("continue", opts.Continue)
	}
	if watching {
		q.Set("watch", "true")
		q.Set("allowWatchBookmarks", fmt.Sprint(opts.AllowWatchBookmarks))
		if opts.TimeoutSeconds != nil {
			q.Set("timeoutSeconds", fmt.Sprint(*opts.TimeoutSeconds))
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lw.base+"?"+q.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		st := &metav1.Status{}
		if err := runtime.DecodeInto(unstructured.UnstructuredJSONScheme, body, &unstructured.Unstructured{}); err == nil {
			_ = jsonUnmarshal(body, st)
		}
		return nil, &apierrors.StatusError{ErrStatus: *st}
	}
	return resp, nil
}

func (lw *httpListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	resp, err := lw.get(context.Background(), opts, false)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	list := &unstructured.UnstructuredList{}
	return list, runtime.DecodeInto(unstructured.UnstructuredJSONScheme, body, list)
}

func (lw *httpListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	resp, err := lw.get(context.Background(), opts, true)
	if err != nil {
		return nil, err
	}
	frames := framer.NewJSONFramedReader(resp.Body)
	dec := restwatch.NewDecoder(streaming.NewDecoder(frames, watchEventDecoder{}), unstructured.UnstructuredJSONScheme)
	return watch.NewStreamWatcher(dec, apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

// watchEventDecoder decodes a watch frame into metav1.WatchEvent.
type watchEventDecoder struct{}

func (watchEventDecoder) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return into, &schema.GroupVersionKind{}, jsonUnmarshal(data, into)
}

// TestClientGoInformer runs client-go's own reflector (list then watch;
// bookmarks; re-watch after a drop; relist after 410) against the server
// while it churns, and checks each informer's store converges on Objects.
func TestClientGoInformer(t *testing.T) {
	t.Parallel()
	c, srv := newTestCluster(t, Options{Seed: 8, BookmarkInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	informers := map[string]cache.SharedIndexInformer{}
	var mu sync.Mutex
	var watchErrs []string
	for name, lw := range map[string]*httpListWatch{
		"pods":         {base: srv.URL + "/api/v1/pods"},
		"nodes":        {base: srv.URL + "/api/v1/nodes"},
		"shop deploys": {base: srv.URL + "/apis/apps/v1/namespaces/shop/deployments"},
		"replicasets":  {base: srv.URL + "/apis/apps/v1/replicasets"},
	} {
		inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) && err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) {
				mu.Lock()
				watchErrs = append(watchErrs, fmt.Sprintf("%s: %v", name, err))
				mu.Unlock()
			}
		})
		informers[name] = inf
		go inf.RunWithContext(ctx)
	}
	t.Cleanup(func() {
		cancel()
		c.SetUnavailable(true) // ends the informers' watches so the server can close
	})
	for name, inf := range informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatalf("%s informer never synced", name)
		}
	}

	churn, stopChurn := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		c.run(churn, 5*time.Millisecond)
		close(done)
	}()
	waitChanges(t, c, 20)
	c.DropWatches()
	waitWatchers(t, c, len(informers)) // each re-watched from its last resourceVersion
	waitChanges(t, c, 20)
	c.CompactHistory()
	c.DropWatches() // a re-watch now gets 410: the reflector relists
	waitWatchers(t, c, len(informers))
	waitChanges(t, c, 20)
	stopChurn()
	<-done

	want := map[string]map[string]string{
		"pods": versions(oracle(c, Pods)), "nodes": versions(oracle(c, Nodes)),
		"replicasets": versions(oracle(c, ReplicaSets)), "shop deploys": {},
	}
	for k, v := range versions(oracle(c, Deployments)) {
		if k[:5] == "shop/" {
			want["shop deploys"][k] = v
		}
	}
	mu.Lock()
	if len(watchErrs) > 0 {
		t.Errorf("watch errors: %v", watchErrs)
	}
	mu.Unlock()
	for name, inf := range informers {
		deadline := time.Now().Add(10 * time.Second)
		for {
			got := map[string]string{}
			for _, o := range inf.GetStore().List() {
				u := o.(*unstructured.Unstructured)
				got[u.GetNamespace()+"/"+u.GetName()] = u.GetResourceVersion()
			}
			if maps.Equal(got, want[name]) && len(got) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s informer has %d objects, cluster %d", name, len(got), len(want[name]))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
