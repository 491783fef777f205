package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

func listBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"77","continue":"c1","remainingItemCount":5},"items":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"metadata":{"name":"p%d","namespace":"ns","resourceVersion":"%d","managedFields":[{"manager":"m"}]},"status":{"podIP":"10.0.0.%d"}}`, i, i+1, i%250)
	}
	b.WriteString(`],"extra":{"ignored":[1,2]}}`)
	return []byte(b.String())
}

// referenceItems decodes a list the slow, obvious way: each item as a map,
// managedFields deleted, kind and apiVersion filled in.
func referenceItems(t testing.TB, body []byte) []map[string]any {
	var list struct{ Items []map[string]any }
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	for _, item := range list.Items {
		if meta, ok := item["metadata"].(map[string]any); ok {
			delete(meta, "managedFields")
		}
		if _, ok := item["kind"]; !ok {
			item["kind"] = "Pod"
		}
		if _, ok := item["apiVersion"]; !ok {
			item["apiVersion"] = "v1"
		}
	}
	return list.Items
}

func sameItems(t testing.TB, got *objectList, want []map[string]any) {
	t.Helper()
	if len(got.Items) != len(want) {
		t.Fatalf("%d items, want %d", len(got.Items), len(want))
	}
	for i, o := range got.Items {
		var m map[string]any
		if err := json.Unmarshal(o.Raw(), &m); err != nil {
			t.Fatalf("item %d is not JSON: %v\n%s", i, err, o.Raw())
		}
		if !reflect.DeepEqual(m, want[i]) {
			t.Fatalf("item %d:\n got %s\nwant %v", i, o.Raw(), want[i])
		}
		for j, name := range sectionNames {
			d := o.doc(name)
			if want := jsonscan.Member(o.Raw(), name); !bytes.Equal(d.Bytes(), want) {
				t.Fatalf("item %d: recorded %s is %.40q, want %.40q", i, name, d.Bytes(), want)
			}
			var keys [4]string
			if knownMembers[j] != nil {
				keys = *knownMembers[j]
			}
			for _, k := range keys {
				if got, want := d.Member(k), jsonscan.Member(d.Bytes(), k); !bytes.Equal(got, want) {
					t.Fatalf("item %d: recorded %s.%s is %.40q, want %.40q", i, name, k, got, want)
				}
			}
		}
		meta := want[i]["metadata"].(map[string]any)
		str := func(k string) string { s, _ := meta[k].(string); return s }
		if o.Name() != str("name") || o.Namespace() != str("namespace") || o.ResourceVersion() != str("resourceVersion") {
			t.Fatalf("item %d: keys %s %s %s, want %v", i, o.Namespace(), o.Name(), o.ResourceVersion(), meta)
		}
	}
}

// TestListDecoding: however the response arrives, in one piece, byte by
// byte or in uneven reads, the items are exactly those of a plain JSON
// decode, without managedFields, and the list metadata is read.
func TestListDecoding(t *testing.T) {
	body := listBody(300)
	want := referenceItems(t, body)
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}
	readers := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(body) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
		"halves":   func() io.Reader { return iotest.HalfReader(bytes.NewReader(body)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) },
	}
	for name, r := range readers {
		t.Run(name, func(t *testing.T) {
			got, err := lw.decodeList(r())
			if err != nil {
				t.Fatal(err)
			}
			sameItems(t, got, want)
			if m := got.ListMeta; m.ResourceVersion != "77" || m.Continue != "c1" || m.RemainingItemCount == nil || *m.RemainingItemCount != 5 {
				t.Errorf("list metadata %+v", m)
			}
		})
	}
}

// TestListPreparesIndexValues: a list's objects have their index values
// made as they are read, and a new list (not a next page) drops those
// its handler has not taken.
func TestListPreparesIndexValues(t *testing.T) {
	ix := newValueIndexes(toolscache.Indexers{nsIndex: namespaceIndexFunc}, nil, func(string, string) *Object { return nil })
	prep := newListPrep(ix, nil)
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}, prep: prep}
	prep.begin()
	got, err := lw.decodeList(bytes.NewReader(listBody(30)))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range got.Items {
		if vs := prep.cur.objs[o].values; len(vs) != 1 || !slices.Equal(vs[0], []string{o.namespace}) {
			t.Fatalf("%s: prepared %q, want its namespace", o.Key(), vs)
		}
	}
	if len(prep.cur.objs) != len(got.Items) {
		t.Fatalf("%d prepared, want %d", len(prep.cur.objs), len(got.Items))
	}
	lw.client = &apiClient{http: http.DefaultClient, base: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}}
	lw.conn, lw.listTimeout = newConnState(time.Now), time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the request fails at once; the list began all the same
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err == nil {
		t.Fatal("a list with a cancelled context succeeded")
	}
	if len(prep.cur.objs) != 0 {
		t.Errorf("%d prepared values kept past a new list, want 0", len(prep.cur.objs))
	}
}

// TestListDecodingRealPods: the same against pods as a real API server
// writes them (testdata/pod.json), where managedFields is not the first
// key of metadata and strings hold escapes.
func TestListDecodingRealPods(t *testing.T) {
	body := podListFixture(t, 40)
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}
	got, err := lw.decodeList(iotest.HalfReader(bytes.NewReader(body)))
	if err != nil {
		t.Fatal(err)
	}
	sameItems(t, got, referenceItems(t, body))
	if bytes.Contains(got.Items[0].Raw(), []byte("managedFields")) {
		t.Error("items keep managedFields")
	}
}

// TestLargeListsAreStreamed: a list is decoded over HTTP as it arrives;
// one much bigger than the decode buffer gives every item.
func TestLargeListsAreStreamed(t *testing.T) {
	body := listBody(3000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	client, err := newAPIClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &Resource{Version: "v1", Plural: "pods", Kind: "Pod"}
	lw := &listWatch{client: client, res: res, shape: Shape{APIVersion: "v1", Kind: "Pod"},
		conn: newConnState(time.Now), listTimeout: 5 * time.Second}
	obj, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameItems(t, obj.(*objectList), referenceItems(t, body))
}

// TestTruncatedListFails: a body cut short, anywhere, must fail, never sync
// a cache that silently lacks objects.
func TestTruncatedListFails(t *testing.T) {
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}
	body := listBody(3)
	for cut := range len(body) - 1 {
		if l, err := lw.decodeList(bytes.NewReader(body[:cut])); err == nil {
			t.Errorf("a list cut at %d of %d bytes decoded without error: %d items", cut, len(body), len(l.Items))
		}
	}
}

// TestMalformedListsFail: structure errors are errors, whatever the reads.
func TestMalformedListsFail(t *testing.T) {
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}
	for _, body := range []string{
		``, `[]`, `{"items":{}}`, `{"items":[1]}`, `{"items":["x"]}`,
		`{"items":[{"metadata":{"name":"a"}]}`, `{"items":[{"metadata":{"name":"a"}}}`,
		`{"items":[{"metadata":{"name":"a"}} {"metadata":{"name":"b"}}]}`,
		`{"items":[{"metadata":{"name":"a" "x":1}}]}`, `{"items":[{"metadata":{"name":1}}]}`,
		`{"items":[{"metadata":{"name":"a\"}}]}`, `{"items" []}`, `{"items":[],}`,
		`{"items":[{"metadata":{"name":"a"},"spec":[}]}`, `{"metadata":{"resourceVersion":5},"items":[]}`,
	} {
		if l, err := lw.decodeList(iotest.HalfReader(strings.NewReader(body))); err == nil {
			t.Errorf("%s decoded without error: %d items", body, len(l.Items))
		}
	}
}

// FuzzDecodeList: no input panics, and whatever encoding/json reads as a
// list of named objects decodes to the same items.
func FuzzDecodeList(f *testing.F) {
	f.Add(listBody(2))
	f.Add([]byte(`{"items":[{"metadata":{"managedFields":[],"name":"a\u0041"}}],"metadata":{}}`))
	f.Add([]byte(`{"items":null}`))
	f.Add([]byte(`{"items":[{"spec":{"a":1},"metadata":{"managedFields":[1],"name":"x","managedFields":2},"status":[],"spec":3}]}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"x"},"spec":{"nodeName":"n","containers":[],"nodeName":"m"},"status":{"podI\u0050":"1.2.3.4","podIPs":null}}]}`))
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := lw.decodeList(iotest.HalfReader(bytes.NewReader(body)))
		if err != nil || !json.Valid(body) {
			return
		}
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
			}
		}
		if json.Unmarshal(body, &list) != nil {
			return
		}
		for _, it := range list.Items {
			if it.Metadata.Name == "" {
				return // Build refuses these; the list must have failed
			}
		}
		sameItems(t, got, referenceItems(t, body))
	})
}

// TestCompressionOption: lists are asked for uncompressed unless
// Options.Compression is set, and a gzipped list reads the same.
func TestCompressionOption(t *testing.T) {
	body := podListFixture(t, 50)
	for _, compress := range []bool{false, true} {
		var got []string
		srv := listServer(t, body)
		srv.Config.Handler = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("watch") == "" {
					got = append(got, r.Header.Get("Accept-Encoding"))
				}
				h.ServeHTTP(w, r)
			})
		}(srv.Config.Handler)
		syncPods(t, &rest.Config{Host: srv.URL}, Spec{Resource: "pods"}, Options{Compression: compress}, 50)
		want := "identity"
		if compress {
			want = "gzip"
		}
		if len(got) == 0 || got[0] != want {
			t.Errorf("compression %t: list asked with Accept-Encoding %q, want %q", compress, got, want)
		}
	}
}

// TestHTTPVersionOption: the API server is spoken to over HTTP/1.1 unless
// Options.HTTP2 is set, even when it offers HTTP/2.
func TestHTTPVersionOption(t *testing.T) {
	body := podListFixture(t, 20)
	for _, h2 := range []bool{false, true} {
		var mu sync.Mutex
		var protos []string
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			protos = append(protos, r.Proto)
			mu.Unlock()
			if r.URL.Query().Get("watch") == "true" {
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				return
			}
			w.Write(body)
		}))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{
			CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}}
		syncPods(t, cfg, Spec{Resource: "pods"}, Options{HTTP2: h2}, 20)
		srv.Close()
		want := "HTTP/1.1"
		if h2 {
			want = "HTTP/2.0"
		}
		mu.Lock()
		if len(protos) == 0 || protos[0] != want {
			t.Errorf("HTTP2 %t: requests made with %v, want %s", h2, protos, want)
		}
		mu.Unlock()
	}
}
