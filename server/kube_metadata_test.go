package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	restclient "k8s.io/client-go/rest"

	"github.com/kubeindex/kubeindex/cache"
	"github.com/kubeindex/kubeindex/cache/cachetest"
)

// TestKubeMetadataClient: client-go's metadata client, as metadata-only
// informers use it, gets through /k8s PartialObjectMetadata holding each
// object's metadata, in get, list and watch; the objects are not sent.
func TestKubeMetadataClient(t *testing.T) {
	f, srv := startKube(t)
	mc, err := metadata.NewForConfig(&restclient.Config{Host: srv.URL + "/k8s"})
	if err != nil {
		t.Fatal(err)
	}
	pods := mc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	ctx := context.Background()
	wantMeta := func(o *cache.Object) metav1.ObjectMeta {
		var obj struct{ Metadata metav1.ObjectMeta }
		if err := json.Unmarshal(o.Raw(), &obj); err != nil {
			t.Fatal(err)
		}
		return obj.Metadata
	}

	list, err := pods.Namespace("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := cachetest.State(t, f.Cache, "pods", cache.ListQuery{Namespace: "kube-system"})
	if len(list.Items) != len(state) || list.ResourceVersion == "" {
		t.Fatalf("%d items at %q; the cache holds %d", len(list.Items), list.ResourceVersion, len(state))
	}
	for _, it := range list.Items {
		o, _, err := f.Cache.Get("pods", it.Namespace, it.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(it.ObjectMeta, wantMeta(o)) {
			t.Errorf("item %s/%s: %+v", it.Namespace, it.Name, it)
		}
	}

	pod := aPod(t, f.Cache)
	got, err := pods.Namespace(pod.Namespace()).Get(ctx, pod.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.ObjectMeta, wantMeta(pod)) {
		t.Errorf("get: %+v", got)
	}

	w, err := pods.Namespace("kube-system").Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		m, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Added || !ok || m.Name == "" || m.Namespace != "kube-system" {
			t.Errorf("first event %s %T %+v", ev.Type, ev.Object, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
}

// TestKubeMetadataRefusals: the wrong form for the request is a 406, as
// on the API server; Table is still served.
func TestKubeMetadataRefusals(t *testing.T) {
	f, h := startServer(t)
	pod := aPod(t, f.Cache)
	podPath := "/k8s/api/v1/namespaces/" + pod.Namespace() + "/pods/" + pod.Name()
	rec := kubeDo(t, h, http.MethodGet, "/k8s/api/v1/pods", kubeMetadataMediaType)
	want(t, rec.Code == 406 && strings.Contains(gjson.Get(rec.Body.String(), "message").Str, "is a list"), rec.Body.String())
	rec = kubeDo(t, h, http.MethodGet, podPath, kubeMetadataListMediaType)
	want(t, rec.Code == 406 && strings.Contains(gjson.Get(rec.Body.String(), "message").Str, "is not a list"), rec.Body.String())
	rec = kubeDo(t, h, http.MethodGet, podPath, kubeMetadataMediaType+",application/json")
	b := gjson.ParseBytes(rec.Body.Bytes())
	want(t, rec.Code == 200 && rec.Header().Get("Content-Type") == kubeMetadataMediaType &&
		b.Get("kind").Str == "PartialObjectMetadata" && !b.Get("spec").Exists() &&
		b.Get("metadata").Raw == gjson.GetBytes(pod.Raw(), "metadata").Raw, "the stored metadata, as it is: "+rec.Body.String())
	rec = kubeDo(t, h, http.MethodGet, "/k8s/api/v1/pods?limit=2", kubeMetadataListMediaType)
	b = gjson.ParseBytes(rec.Body.Bytes())
	want(t, rec.Code == 200 && b.Get("kind").Str == "PartialObjectMetadataList" && b.Get("metadata.continue").Str != "" &&
		len(b.Get("items").Array()) == 2 && json.Valid(rec.Body.Bytes()), "a page: "+rec.Body.String())
	want(t, b.Get("items.0.kind").Str == "PartialObjectMetadata" && b.Get("items.0.metadata.name").Exists() && !b.Get("items.0.spec").Exists(),
		"items of metadata only: "+b.Get("items.0").Raw)
	rec = kubeDo(t, h, http.MethodGet, "/k8s/api/v1/namespaces/kube-system/pods", kubeMetadataListMediaType)
	want(t, rec.Code == 200 && rec.Header().Get("Content-Length") == strconv.Itoa(rec.Body.Len()), "the length as written: "+rec.Header().Get("Content-Length"))
}

func TestKubeMetadataWatch(t *testing.T) {
	_, srv := startKube(t)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/k8s/api/v1/namespaces/kube-system/pods?watch=1&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", nil)
	req.Header.Set("Accept", kubeMetadataMediaType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		ev := gjson.ParseBytes(sc.Bytes())
		obj := ev.Get("object")
		want(t, obj.Get("kind").Str == "PartialObjectMetadata" && obj.Get("apiVersion").Str == "meta.k8s.io/v1" && !obj.Get("spec").Exists(),
			"an event of metadata: "+sc.Text())
		if ev.Get("type").Str == "BOOKMARK" {
			want(t, obj.Get(`metadata.annotations.k8s\.io/initial-events-end`).Str == "true", "the end of the initial events")
			return
		}
	}
	t.Fatal("the watch ended before its initial events did")
}
