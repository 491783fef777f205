package cache

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// inline builds without chunks: what Build made before objects were
// stored in pieces, the reference the pieces must reproduce.
func inline(t testing.TB, s Shape, in []byte) *Object {
	t.Helper()
	s.inline = true
	o, err := s.Build(in)
	if err != nil {
		t.Fatalf("inline build: %v", err)
	}
	if o.Chunked() {
		t.Fatal("an inline build has chunks")
	}
	return o
}

// sameObject fails unless o, however stored, reads as want in every way a
// reader reads an object: its bytes whole, in pieces, appended and
// written, its sections and their known members, and its keys.
func sameObject(t testing.TB, in []byte, o, want *Object) {
	t.Helper()
	w := want.Raw()
	var pieces [][]byte
	var written bytes.Buffer
	if _, err := o.WriteTo(&written); err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string][]byte{
		"Raw":      o.Raw(),
		"flat":     o.flat(),
		"AppendTo": o.AppendTo([]byte{}),
		"Pieces":   bytes.Join(o.Pieces(pieces), nil),
		"WriteTo":  written.Bytes(),
	} {
		if !bytes.Equal(got, w) {
			t.Fatalf("%.80q: %s is\n%q, want\n%q", in, what, got, w)
		}
	}
	var scratch []byte
	if got := o.flatInto(&scratch); !bytes.Equal(got, w) {
		t.Fatalf("%.80q: flatInto is %q", in, got)
	}
	if got, want := o.Metadata(), jsonscan.Member(w, "metadata"); !bytes.Equal(got, want) {
		t.Fatalf("%.80q: Metadata is %q, want %q", in, got, want)
	}
	if o.Len() != len(w) || o.Key() != want.Key() || o.ResourceVersion() != want.ResourceVersion() || o.UID() != want.UID() {
		t.Fatalf("%.80q: length %d, key %q, rv %q, uid %q; want %d %q %q %q", in, o.Len(), o.Key(), o.ResourceVersion(), o.UID(),
			len(w), want.Key(), want.ResourceVersion(), want.UID())
	}
	if o.walked != want.walked || o.sections != want.sections {
		t.Fatalf("%.80q: sections %v walked %v, want %v %v", in, o.sections, o.walked, want.sections, want.walked)
	}
	for i, name := range sectionNames {
		d, wd := o.doc(name), want.doc(name)
		if !bytes.Equal(d.Bytes(), wd.Bytes()) || d.IsObject() != wd.IsObject() {
			t.Fatalf("%.80q: section %s is %q, want %q", in, name, d.Bytes(), wd.Bytes())
		}
		keys := append(knownMembers[i][:], "name", "x", "containers", "volumes", "tolerations", "nodeName", "")
		for _, k := range keys {
			if got, want := d.Member(k), wd.Member(k); !bytes.Equal(got, want) {
				t.Fatalf("%.80q: %s.%s is %q, want %q", in, name, k, got, want)
			}
		}
	}
}

// big is a JSON value of at least chunkMin bytes, made of v.
func big(v string) string {
	return `[` + strings.Repeat(v+`,`, chunkMin/len(v)+1) + v + `]`
}

// TestChunkedObjectsReadAsStored: an object whose repeated members are
// stored as chunks reads, for every reader, exactly as the object stored
// whole: the bytes, the sections and their known members, with the
// chunked members anywhere in the spec, duplicated, escaped, beside
// managedFields, kind and apiVersion added, and values of every shape.
func TestChunkedObjectsReadAsStored(t *testing.T) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	c := big(`{"name":"app","image":"r/app:1","args":["--a=\"q\"","\u00e9\\n"],"env":[],"resources":{}}`)
	v := big(`{"name":"data","emptyDir":{}}`)
	inputs := []string{
		string(pod),
		`{"metadata":{"name":"a"},"spec":{"containers":` + c + `}}`,
		`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"m":1}],"namespace":"n"},"spec":{"volumes":` + v + `,"nodeName":"n1","containers":` + c + `,"tolerations":` + v + `},"status":{"podIP":"10.0.0.1"}}`,
		`{"spec":{"nodeName":"n1","containers":` + c + `},"metadata":{"managedFields":[],"name":"a"},"status":{}}`,
		`{"metadata":{"name":"a"},"spec":{"containers":` + c + `,"containers":` + c + `,"volumes":` + v + `}}`,
		` { "metadata" : { "name" : "a" } , "spec" : { "containers" : ` + c + ` , "volumes" : ` + v + ` } } `,
		`{"metadata":{"name":"a"},"spec":{"c\u006fntainers":` + c + `,"affinity":{"x":"` + strings.Repeat("y", chunkMin) + `"}}}`,
		`{"metadata":{"name":"a"},"spec":{"containers":"` + strings.Repeat(`\"`, chunkMin) + `","volumes":[],"tolerations":{}}}`,
		`{"metadata":{"name":"a"},"spec":{"containers":` + c + `},"spec":{"containers":` + c + `}}`,
		`{"metadata":{"name":"a"},"spec":[` + c + `]}`,
		`{"metadata":{"name":"a"},"spec":{"containers":` + strings.Repeat(" ", 10) + c + `}}`,
		`{"metadata":{"name":"a"},"spec":{"volumes":[` + v + `,{"name":"kube-api-access-x1y2z"},` + v + `,"kube-api-access-",` + v + `],"containers":[` + c + `,"kube-api-access-ab12c","kube-api-access-ab12c"]}}`,
		`{"metadata":{"name":"a"},"spec":{"containers":[` + c + `,"kube-api-access-` + strings.Repeat("q", chunkMin) + `"]}}`,
		`{"metadata":{"name":"a"},"spec":{"containers":["kube-api-access-",` + c + `,"\"kube-api-access-\"",` + c + `]}}`,
	}
	shapes := []Shape{{}, {APIVersion: "v1", Kind: "Pod"}}
	for _, in := range inputs {
		for _, s := range shapes {
			want := inline(t, s, []byte(in))
			for range 2 { // the first sight makes the chunks, the second finds them
				o, err := s.Build([]byte(in))
				if err != nil {
					t.Fatalf("%.80q: %v", in, err)
				}
				sameObject(t, []byte(in), o, want)
			}
		}
	}
	first, err := NewObject(pod, "v1", "Pod")
	if err != nil {
		t.Fatal(err)
	}
	o, err := NewObject(pod, "v1", "Pod")
	runtime.KeepAlive(first)
	if err != nil || len(o.chunkRefs()) < 3 {
		t.Fatalf("the bench's pod has %d chunks (%v), want its containers and volumes around their token volume names", len(o.chunkRefs()), err)
	}
	redacted, err := Shape{Drop: []string{"spec.nodeName"}}.Build(pod)
	if err != nil || redacted.Chunked() {
		t.Fatalf("a redacted object is stored whole: chunked %v, %v", redacted.Chunked(), err)
	}
}

// TestChunksAreShared: the objects that have the same long value share
// one chunk; a different value or a short one is not shared.
func TestChunksAreShared(t *testing.T) {
	c := big(`{"name":"shared-` + t.Name() + `"}`)
	obj := func(name, containers string) *Object {
		o, err := NewObject([]byte(`{"metadata":{"name":"`+name+`"},"spec":{"containers":`+containers+`}}`), "v1", "Pod")
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	seen := obj("a", c)
	if seen.Chunked() {
		t.Fatal("a value met for the first time became a chunk")
	}
	a, b := obj("a", c), obj("b", c)
	obj("c", big(`{"name":"other-`+t.Name()+`"}`))
	other, short := obj("c", big(`{"name":"other-`+t.Name()+`"}`)), obj("d", `[{"name":"x"}]`)
	obj("d", `[{"name":"x"}]`)
	if !a.Chunked() || !b.Chunked() || a.chunkRefs()[0].c != b.chunkRefs()[0].c {
		t.Fatal("two objects with the same containers do not share them")
	}
	if !other.Chunked() || other.chunkRefs()[0].c == a.chunkRefs()[0].c {
		t.Fatal("different containers share a chunk")
	}
	if short.Chunked() {
		t.Fatal("a value shorter than chunkMin became a chunk")
	}
	sameObject(t, nil, seen, a)
	if a.Len() != len(a.Raw()) || len(a.own)+len(c) != a.Len() {
		t.Fatalf("lengths: own %d, chunk %d, object %d", len(a.own), len(c), a.Len())
	}
}

// TestChunkTableEmptiesWhenObjectsGo: the table holds a chunk while an
// object holds it, and nothing once every object that held one is gone,
// whichever way the objects went (the collector counts the references).
func TestChunkTableEmptiesWhenObjectsGo(t *testing.T) {
	tab := newChunkTable()
	rng := rand.New(rand.NewPCG(1, 2))
	var held []*chunk
	for i := range 200 {
		v := []byte(big(fmt.Sprintf(`{"n":%d}`, rng.IntN(50))))
		if tab.intern(v) == nil {
			tab.intern(v) // the first meeting leaves it inline
		}
		c := tab.intern(v)
		if c == nil || !bytes.Equal(c.b, v) {
			t.Fatalf("intern %d: %v", i, c)
		}
		if i%3 == 0 {
			held = append(held, c)
		}
	}
	if tab.len() == 0 || tab.len() > 50 {
		t.Fatalf("the table holds %d chunks of at most 50 values", tab.len())
	}
	kept := held[0]
	held = nil
	waitFor(t, "the table to hold only what is held", func() bool { return tab.len() == 1 })
	if again := tab.intern(kept.b); again != kept {
		t.Fatal("a held chunk was not found again")
	}
	runtime.KeepAlive(kept)
	kept = nil
	waitFor(t, "the table to empty", func() bool { return tab.len() == 0 })

	// Objects of the cache: every one gone, none of their chunks stays.
	var objs []*Object
	for i := range 100 {
		o, err := NewObject([]byte(fmt.Sprintf(`{"metadata":{"name":"p%d"},"spec":{"containers":%s,"volumes":%s}}`, i,
			big(fmt.Sprintf(`{"name":"%s-%d"}`, t.Name(), i%7)), big(`{"v":"`+t.Name()+`"}`))), "v1", "Pod")
		if err != nil || i >= 7 && len(o.chunkRefs()) != 2 {
			t.Fatalf("object %d: %d chunks, %v", i, len(o.chunkRefs()), err)
		}
		objs = append(objs, o)
	}
	values := [][]byte{}
	for _, o := range objs[7:15] {
		for _, c := range o.chunkRefs() {
			values = append(values, bytes.Clone(c.c.b))
		}
	}
	objs = nil
	waitFor(t, "the objects' chunks to leave the table", func() bool {
		for _, v := range values {
			if chunks.holds(v) {
				return false
			}
		}
		return true
	})
}

// waitFor collects until cond holds, failing after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// FuzzChunkedObject: for any input, an object built with chunks reads as
// the object built whole, the input placed as a spec member that may
// become a chunk, and as the whole object.
func FuzzChunkedObject(f *testing.F) {
	f.Add([]byte(`{"a":"b"}`), uint8(0))
	f.Add([]byte(`[{"name":"x","args":["\u00e9","\\",""]},{},[],null]`), uint8(1))
	f.Add([]byte(`{"metadata":{"name":"a"},"spec":{"containers":[1,2,3]}}`), uint8(2))
	f.Add([]byte(`{"name":"kube-api-access-1a2b3","x":"kube-api-access-"}`), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, at uint8) {
		member := internMembers[int(at)%len(internMembers)]
		pad := big(`"` + strings.Repeat("p", int(at)) + `"`)
		for _, doc := range [][]byte{
			in,
			fmt.Appendf(nil, `{"metadata":{"name":"a"},"spec":{"%s":%s,"x":%s}}`, member, in, pad),
			fmt.Appendf(nil, `{"metadata":{"name":"a","managedFields":[]},"spec":{"nodeName":"n","%s":%s,"%s":[%s,%s]}}`, member, pad, member, in, pad),
			fmt.Appendf(nil, `{"metadata":{"name":"a"},"spec":{"%s":[%s,"kube-api-access-%x",%s,%s]}}`, member, pad, at, in, pad),
		} {
			want, err := Shape{inline: true}.Build(doc)
			if err != nil {
				continue
			}
			for range 2 {
				o, err := Shape{}.Build(doc)
				if err != nil {
					t.Fatalf("%q: built inline, not with chunks: %v", doc, err)
				}
				sameObject(t, doc, o, want)
			}
		}
	})
}

// TestMessagesOfChunkedObjects: a stream's message of an object held in
// pieces (a snapshot item, an event, a change with its patches) is byte
// for byte the message of the object stored whole.
func TestMessagesOfChunkedObjects(t *testing.T) {
	pod, err := os.ReadFile("testdata/pod.json")
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(pod, []byte(`"phase":"Running"`), []byte(`"phase":"Pending"`), 1)
	build := func(s Shape, in []byte) *Object {
		o, err := s.Build(in)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	s := Shape{APIVersion: "v1", Kind: "Pod"}
	build(s, pod)
	o, old := build(s, changed), build(s, pod)
	whole, wholeOld := inline(t, s, changed), inline(t, s, pod)
	if !o.Chunked() || !old.Chunked() {
		t.Fatal("the pods are not held in pieces")
	}
	messages := func(o, old *Object) []*Message {
		return []*Message{
			{Type: MessageType(Added), obj: o},
			{Type: MessageType(Added), ev: &event{typ: Added, obj: o, rvStr: "5"}},
			{Type: MessageType(Modified), ev: &event{typ: Modified, obj: o, old: old, rvStr: "6"}, diff: MergePatch},
			{Type: MessageType(Modified), ev: &event{typ: Modified, obj: o, old: old, rvStr: "6"}, diff: JSONPatch},
			{Type: MessageType(Deleted), ev: &event{typ: Deleted, obj: o, rvStr: "7"}},
		}
	}
	got, want := messages(o, old), messages(whole, wholeOld)
	for i := range got {
		var w bytes.Buffer
		if _, err := got[i].WriteTo(&w); err != nil {
			t.Fatal(err)
		}
		exp := want[i].AppendTo(nil)
		if a := got[i].AppendTo(nil); !bytes.Equal(a, exp) || !bytes.Equal(w.Bytes(), exp) || got[i].Len() != len(exp) {
			t.Fatalf("message %d:\n%.300s\nwant\n%.300s", i, a, exp)
		}
	}
}
