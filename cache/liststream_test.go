package cache

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
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

// TestLargeListsAreStreamed: a response too big to buffer is decoded item by
// item and gives exactly what the buffered path gives.
func TestLargeListsAreStreamed(t *testing.T) {
	body := listBody(300)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	client, err := newAPIClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	res := &Resource{Version: "v1", Plural: "pods", Kind: "Pod"}
	lw := &listWatch{client: client, res: res, shape: Shape{APIVersion: "v1", Kind: "Pod"},
		conn: newConnState(time.Now), listTimeout: 5 * time.Second}

	defer func(old int) { bufferedList = old }(bufferedList)
	var got [2]*objectList
	for i, limit := range []int{1 << 20, 1 << 10} { // buffered, then streamed
		bufferedList = limit
		obj, err := lw.ListWithContext(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatalf("buffer %d: %v", limit, err)
		}
		got[i] = obj.(*objectList)
	}
	if len(got[1].Items) != 300 || len(got[0].Items) != 300 {
		t.Fatalf("items: buffered %d, streamed %d; expect 300", len(got[0].Items), len(got[1].Items))
	}
	for i := range got[0].Items {
		if !bytes.Equal(got[0].Items[i].Raw(), got[1].Items[i].Raw()) {
			t.Fatalf("item %d differs:\n%s\n%s", i, got[0].Items[i].Raw(), got[1].Items[i].Raw())
		}
	}
	if m := got[1].ListMeta; m.ResourceVersion != "77" || m.Continue != "c1" || m.RemainingItemCount == nil || *m.RemainingItemCount != 5 {
		t.Errorf("streamed list metadata %+v", m)
	}
	if bytes.Contains(got[1].Items[0].Raw(), []byte("managedFields")) {
		t.Error("streamed items keep managedFields")
	}
}

// TestTruncatedListFails: a body cut short must fail, never sync a cache
// that silently lacks objects.
func TestTruncatedListFails(t *testing.T) {
	lw := &listWatch{res: &Resource{Plural: "pods"}, shape: Shape{APIVersion: "v1", Kind: "Pod"}}
	body := listBody(50)
	for _, cut := range []int{len(body) / 2, len(body) - 3, 40} {
		if _, err := lw.decodeListStream(io.LimitReader(bytes.NewReader(body), int64(cut))); err == nil {
			t.Errorf("a list cut at %d of %d bytes decoded without error", cut, len(body))
		}
	}
}
