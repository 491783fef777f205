package cache

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// Object is one cached Kubernetes object: its JSON bytes, with
// metadata.managedFields removed and apiVersion/kind always present, plus
// the few metadata fields the cache needs for keys. An Object is immutable
// once built: readers may hand Raw() straight to a response writer, and
// every reader shares the same bytes.
type Object struct {
	// own is the object's JSON less the chunks' values (object_chunks.go),
	// which go in where chunks say (object_pieces.go): without chunks,
	// the object's JSON. Every other place an Object records is in the
	// object's JSON, not in raw.
	own             []byte
	chunks          *chunkList // nil: none
	namespace, name string
	resourceVersion string
	uid             string
	// where in raw the values of metadata, spec and status are (to == 0:
	// absent or unknown), so that index functions go straight to them;
	// and, within spec and status, the members the built-in indexes read
	// (see knownMembers).
	sections [3]struct{ from, to uint32 }
	known    [3]nearSpans // relative to the section; valid when walked
	walked   [3]bool
	// columns are the values questions read (Table columns, paths), kept once
	// made (ask_columns.go); nil until a question reads a column.
	columns atomic.Pointer[keptValues]
	// proto are the object's protobuf encodings, made at the first
	// reader that asks for one (object_proto.go); nil until then.
	proto atomic.Pointer[keptProto]
	// posted are the postings of its shard's value indexes it is in,
	// in their indexes' order (store_index.go): its values, found there
	// when it is replaced or deleted rather than read again. Only the
	// indexes read and write them, under their lock (a list's reader,
	// addTo, while the object is its own); nothing else of the object
	// changes.
	posted []*postings
}

// sectionNames are the top-level members whose place Build records.
var sectionNames = [3]string{"metadata", "spec", "status"}

// knownMembers are, per section, the members whose place Build records
// on the way through: those the built-in indexes, the by-IP answer and the
// address feed read, deep in the section (a pod's nodeName comes after its
// volumes and containers, its startTime after its conditions, and its
// ownerReferences after its annotations). Each is read once per event or
// index: without its place, every reader scans the section again.
var knownMembers = [3]*[4]string{
	{"creationTimestamp", "labels", "ownerReferences", "annotations"},
	{"nodeName", "containers", "hostNetwork", "ports"},
	{"podIP", "podIPs", "phase", "startTime"},
}

// doc returns the top-level member key with what Build learnt about it.
func (o *Object) doc(key string) jsonscan.Doc { return o.docIn(key, nil) }

// docIn is doc with a section held in pieces listed in pieces' array
// when it has room (maxPieces): a caller that keeps nothing of the Doc
// makes no slice.
func (o *Object) docIn(key string, pieces [][]byte) jsonscan.Doc {
	for i, name := range sectionNames {
		if name != key {
			continue
		}
		sec := o.sections[i]
		if sec.to == 0 {
			break
		}
		d := o.sectionDoc(sec.from, sec.to, pieces)
		if o.walked[i] {
			d.Keys, d.Spans = knownMembers[i], o.known[i].spans()
		}
		return d
	}
	return jsonscan.Doc{Raw: jsonscan.Member(o.flat(), key)}
}

// labels returns the value of metadata.labels (nil: none). An object's
// metadata is never held in pieces, so nothing is joined.
func (o *Object) labels() []byte {
	d := o.doc("metadata")
	return d.Member("labels")
}

// indexValues are the values of an index function that reads the
// top-level member root ("": the whole object; indexers.Spec.Rooted): an
// object held in pieces is joined only for one that reads it whole.
func (o *Object) indexValues(root string, f indexers.DocFunc) []string {
	if root == "" {
		return f(jsonscan.Doc{Raw: o.flat()})
	}
	return f(o.doc(root))
}

// Metadata returns the value of the object's metadata member (nil: none).
// The caller must not modify it. Metadata is never held in pieces, so an
// object held in pieces is not joined to read it.
func (o *Object) Metadata() []byte {
	if d := o.doc("metadata"); d.Pieces == nil {
		return d.Raw
	}
	return jsonscan.Member(o.flat(), "metadata") // not held so; whole, as Raw is
}

// Raw returns the object's JSON. The caller must not modify it. For an
// object held in pieces (Chunked) it joins them into a new slice: a writer
// of the whole object writes its Pieces instead (WriteTo, AppendTo).
func (o *Object) Raw() []byte { return o.flat() }

// Namespace returns metadata.namespace ("" for cluster-scoped objects).
func (o *Object) Namespace() string { return o.namespace }

// Name returns metadata.name.
func (o *Object) Name() string { return o.name }

// ResourceVersion returns metadata.resourceVersion.
func (o *Object) ResourceVersion() string { return o.resourceVersion }

// UID returns metadata.uid.
func (o *Object) UID() string { return o.uid }

// Key returns the cache key: "namespace/name", or "name" when cluster-scoped.
func (o *Object) Key() string {
	if o.namespace == "" {
		return o.name
	}
	return o.namespace + "/" + o.name
}

// GetObjectKind implements runtime.Object. The kind lives in the bytes.
func (o *Object) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object. Objects are immutable, so the
// copy is the object itself.
func (o *Object) DeepCopyObject() runtime.Object { return o }

// GetObjectMeta implements metav1.ObjectMetaAccessor, which is how client-go
// computes keys and reads resource versions (several times per object on
// its way into the store). It answers a view of o (object_meta.go), not a
// copy: nothing is allocated.
func (o *Object) GetObjectMeta() metav1.Object { return (*objectMeta)(o) }

var errNotObject = errors.New("not a JSON object with metadata.name")

// NewObject builds an Object from JSON as the API server sends it. It copies:
// the result never shares memory with raw. apiVersion and kind are added when
// missing (typed list responses omit them on items), so that a GET answers
// what the API server's GET answers.
func NewObject(raw []byte, apiVersion, kind string) (*Object, error) {
	return Shape{APIVersion: apiVersion, Kind: kind}.Build(raw)
}

// Shape is how objects of one resource enter the cache: the apiVersion and
// kind to add where the API server omitted them, and the fields to drop
// besides managedFields (redacted fields never reach memory that outlives
// the decode).
type Shape struct {
	APIVersion, Kind string
	// Drop lists gjson paths of plain keys (dots in keys escaped as \.).
	Drop []string
	// inline stores every object whole, without chunks (tests' reference).
	inline bool
}

// Build turns API-server JSON into an immutable Object; see NewObject.
func (s Shape) Build(raw []byte) (*Object, error) {
	o, n, err := s.build(raw, nil)
	if err == jsonscan.ErrShort {
		return nil, errNotObject
	}
	if err == nil && jsonscan.SkipSpace(raw, n) != len(raw) {
		err = jsonscan.SyntaxError(raw, jsonscan.SkipSpace(raw, n), "data after the object")
	}
	return o, err
}

// build reads the object at the start of b (after any space) and returns
// it with the number of bytes it took, or jsonscan.ErrShort if b ends
// before the object does. It walks the object once (scan), writes the
// stored bytes (assemble), records where the sections landed in them
// (placeSections) and applies the redactions (redact). When input is not
// nil, it receives the object's spec and status as b holds them (see
// inList), where they are the object's own: always, but for redactions.
func (s Shape) build(b []byte, input *[3]jsonscan.Doc) (*Object, int, error) {
	o := &Object{}
	var sc scanned
	if err := o.scan(b, &sc); err != nil {
		return nil, 0, err
	}
	interning := !s.inline && len(s.Drop) == 0 && sc.end-sc.start <= math.MaxUint32/2 && o.walked[1]
	var in internedValues
	if interning {
		in.intern(b, &sc.candidates)
	}
	prefixLen := s.assemble(o, b, &sc, &in)
	o.placeChunks(&sc, prefixLen, &in)
	if len(s.Drop) == 0 && o.Len() <= math.MaxUint32 {
		o.placeSections(&sc, prefixLen)
	} else {
		o.walked = [3]bool{} // redactions move things: sections stay unknown
	}
	if err := o.redact(s.Drop); err != nil {
		return nil, 0, err
	}
	if input != nil && len(s.Drop) == 0 {
		for i := 1; i < len(sectionNames); i++ { // metadata's input holds managedFields
			if sec := sc.sections[i]; sec.to != 0 {
				input[i] = jsonscan.Doc{Raw: b[sec.from:sec.to]}
				if o.walked[i] {
					input[i].Keys, input[i].Spans = knownMembers[i], o.known[i].spans()
				}
			}
		}
	}
	return o, sc.end, nil
}

// inList is an object as a list response is read: with its spec and
// status as the response holds them, valid only until the response's
// next bytes are read. Index functions given one (valueIndexes.prepare)
// read those sections there, where they are whole, rather than from the
// object stored, which keeps parts of a pod's spec as shared chunks
// (object_chunks.go): a member that spans a chunk and the object's own
// bytes (a pod's containers, around its token volume's name) is read in
// place instead of joined into a new slice. The bytes are the same
// (TestInListValues).
type inList struct {
	*Object
	input [3]jsonscan.Doc // by sectionNames; Raw nil: read the object's own
}

// doc is Object.doc, from the input where it has the section.
func (l *inList) doc(key string) jsonscan.Doc {
	for i, name := range sectionNames {
		if name == key && l.input[i].Raw != nil {
			return l.input[i]
		}
	}
	return l.Object.doc(key)
}

// indexValues is Object.indexValues, reading sections through doc.
func (l *inList) indexValues(root string, f indexers.DocFunc) []string {
	if root == "" {
		return l.Object.indexValues(root, f)
	}
	return f(l.doc(root))
}

// scanned is what scan found in the input: where the object is, whether
// it has kind and apiVersion, the managedFields to cut (each with one
// comma) and the sections' places, all in the input's coordinates.
type scanned struct {
	start, end             int
	hasKind, hasAPIVersion bool
	cuts                   spans
	sections               [3]span
	// metaKnown are where the first metadata's knownMembers[0] are (to ==
	// 0: absent), in the input's coordinates: the cuts move them.
	metaKnown [4]span
	// candidates are the values of the spec's internMembers long enough
	// to be stored as chunks, in order.
	candidates candidates
}

// scan walks the object at the start of b once: the top-level keys, and
// the members of metadata, where it takes the key fields into o and finds
// managedFields to cut out; each section's known members go into o.
func (o *Object) scan(b []byte, sc *scanned) error {
	r, err := jsonscan.OpenObject(b, 0)
	if err == jsonscan.ErrNotObject {
		return errNotObject
	}
	if err != nil {
		return err
	}
	sc.start = jsonscan.SkipSpace(b, 0)
	for {
		more, err := r.Next()
		if err != nil {
			return err
		}
		if !more {
			break
		}
		switch string(r.Key) {
		case "kind":
			sc.hasKind = true
		case "apiVersion":
			sc.hasAPIVersion = true
		case "metadata":
			var known *[4]span // the first metadata's only: the one doc reads
			if sc.sections[0].to == 0 {
				known = &sc.metaKnown
			}
			end, err := o.readMetadata(b, r.ValAt, &sc.cuts, known)
			if err != nil {
				return err
			}
			r.Done(end)
			if sc.sections[0].to == 0 {
				sc.sections[0] = span{r.ValAt, end}
			}
			continue
		}
		i := slices.Index(sectionNames[1:], string(r.Key)) + 1
		if i == 0 || sc.sections[i].to != 0 {
			if _, err := r.Skip(); err != nil {
				return err
			}
			continue
		}
		var cands *candidates
		if i == 1 {
			cands = &sc.candidates
		}
		end, known, walked, err := walkSection(b, r.ValAt, knownMembers[i], cands)
		if err != nil {
			return err
		}
		r.Done(end)
		sc.sections[i] = span{r.ValAt, end}
		o.known[i], o.walked[i] = near(known, walked)
	}
	if o.name == "" {
		return errNotObject
	}
	sc.end = r.End()
	return nil
}

// assemble writes o.own in one allocation of the exact size: the object's
// bytes with kind and apiVersion added where the input lacks them and the
// Shape gives them, less the cuts. It returns the length of what was added
// before the object's own first member. bytes.Join is the allocation: it
// does not clear memory it is about to fill (make does, at a cost
// BenchmarkInitialSync measures; BENCHMARKS.md).
func (s Shape) assemble(o *Object, b []byte, sc *scanned, in *internedValues) (prefixLen int) {
	raw := b[sc.start:sc.end]
	var preBuf [96]byte
	pre := append(preBuf[:0], '{')
	if !sc.hasKind && s.Kind != "" {
		pre = append(pre, `"kind":`...)
		pre = append(jsonscan.AppendString(pre, s.Kind), ',')
	}
	if !sc.hasAPIVersion && s.APIVersion != "" {
		pre = append(pre, `"apiVersion":`...)
		pre = append(jsonscan.AppendString(pre, s.APIVersion), ',')
	}
	prefixLen = len(pre) - 1
	var pieceBuf [4 + maxChunks][]byte
	pieces := append(pieceBuf[:0], pre)
	at := 1
	cuts, values := sc.cuts.all(), in.spans[:in.n]
	for len(cuts) > 0 || len(values) > 0 {
		var c span
		if len(values) == 0 || len(cuts) > 0 && cuts[0].from < values[0].from {
			c, cuts = cuts[0], cuts[1:]
		} else {
			c, values = values[0], values[1:]
		}
		pieces = append(pieces, raw[at:c.from-sc.start])
		at = c.to - sc.start
	}
	o.own = bytes.Join(append(pieces, raw[at:]), nil)
	return prefixLen
}

// placeSections maps the sections found by scan into o.own: shifted by the
// prefix, less the cuts before each position (all inside metadata), and
// so metadata's known members, which may follow a cut.
func (o *Object) placeSections(sc *scanned, prefixLen int) {
	pos := func(p int) uint32 { return sc.place(p, prefixLen) }
	for i, sec := range sc.sections {
		if sec.to != 0 {
			o.sections[i].from, o.sections[i].to = pos(sec.from), pos(sec.to)
		}
	}
	if sc.sections[0].to == 0 {
		return
	}
	var known [4]jsonscan.Span
	for i, m := range sc.metaKnown {
		if m.to != 0 {
			from := o.sections[0].from
			known[i] = jsonscan.Span{From: pos(m.from) - from, To: pos(m.to) - from}
		}
	}
	o.known[0], o.walked[0] = near(known, true)
}

// place maps p, a position in the input, into the object's JSON: shifted
// by the prefix, less the cuts before it.
func (sc *scanned) place(p, prefixLen int) uint32 {
	q := p - sc.start + prefixLen
	for _, c := range sc.cuts.all() {
		if c.to <= p {
			q -= c.to - c.from
		}
	}
	return uint32(q)
}

// placeChunks records where in raw each internedValues value goes: its place in
// the object's JSON less the chunks before it.
func (o *Object) placeChunks(sc *scanned, prefixLen int, in *internedValues) {
	if in.n == 0 {
		return
	}
	l := &chunkList{}
	l.list = l.first[:0]
	before := 0
	for i, v := range in.spans[:in.n] {
		l.list = append(l.list, chunkAt{at: sc.place(v.from, prefixLen) - uint32(before), c: in.chunks[i]})
		before += v.to - v.from
	}
	o.chunks = l
}

// candidates are values that may become chunks (see scanned).
type candidates struct {
	n     int
	spans [len(internMembers)]span
}

// add records the member's value at [from, to) when it may become a chunk.
func (c *candidates) add(key []byte, from, to int) {
	if to-from < chunkMin || c.n == len(c.spans) || !slices.Contains(internMembers[:], string(key)) {
		return
	}
	c.spans[c.n] = span{from, to}
	c.n++
}

// internedValues are the parts of candidates that became chunks, with
// their chunks.
type internedValues struct {
	n      int
	spans  [maxChunks]span
	chunks [maxChunks]*chunk
}

// intern looks each candidate in b up in the chunk table: its value, or,
// when it names the pod's service account token volume, each part of it
// around those names (tokenParts).
func (in *internedValues) intern(b []byte, cands *candidates) {
	var buf [8]span
	for _, v := range cands.spans[:cands.n] {
		for _, part := range tokenParts(b, v, buf[:0]) {
			if in.n == len(in.spans) {
				return
			}
			if part.to-part.from < chunkMin {
				continue
			}
			if c := chunks.intern(b[part.from:part.to]); c != nil {
				in.spans[in.n], in.chunks[in.n] = part, c
				in.n++
			}
		}
	}
}

// tokenVolume starts the name of the volume through which Kubernetes
// mounts a pod's service account token in every container; the API
// server's admission ends it with a suffix of the pod's own. The pods of
// one controller differ in those names only.
var tokenVolume = []byte(`kube-api-access-`) // a quote before it (searched from its rarer first byte)

// tokenParts splits the value at v around each token volume name in it
// (the name's characters after the prefix, to the closing quote, stay
// with the object): the parts repeat across the pods of a controller.
// Most values hold none and are one part. The parts are appended to parts.
func tokenParts(b []byte, v span, parts []span) []span {
	from, at := v.from, v.from // the part's start, and where to search on
	for at < v.to {
		i := bytes.Index(b[at:v.to], tokenVolume)
		if i < 0 {
			break
		}
		name := at + i + len(tokenVolume)
		at = name
		if b[name-len(tokenVolume)-1] != '"' { // within a string, not its start
			continue
		}
		end := bytes.IndexByte(b[name:v.to], '"')
		if end < 0 {
			break
		}
		parts = append(parts, span{from, name})
		from, at = name+end, name+end
	}
	return append(parts, span{from, v.to})
}

// nearSpans are a section's known members' places in two bytes each:
// every Object has three, and a section's members almost always lie
// within its first 64 KiB. A section where one does not stays unwalked:
// its readers scan it, as they scan a section Build could not walk.
type nearSpans [4]struct{ from, to uint16 }

// near packs spans, ok when every one fits (and walked).
func near(spans [4]jsonscan.Span, walked bool) (n nearSpans, ok bool) {
	for i, s := range spans {
		if s.To > math.MaxUint16 {
			return nearSpans{}, false
		}
		n[i].from, n[i].to = uint16(s.From), uint16(s.To)
	}
	return n, walked
}

func (n *nearSpans) spans() (out [4]jsonscan.Span) {
	for i, s := range n {
		out[i] = jsonscan.Span{From: uint32(s.from), To: uint32(s.to)}
	}
	return out
}

// redact removes the Shape's Drop paths from o.own.
func (o *Object) redact(drop []string) error {
	for _, path := range drop {
		var err error
		if o.own, err = removePath(o.own, path); err != nil {
			return err
		}
	}
	return nil
}

// walkSection passes over the value at b[at:], as Skip would, and when it
// is an object records where its members named in keys are (relative to
// at; the first of each). walked is false when it is not an object.
func walkSection(b []byte, at int, keys *[4]string, cands *candidates) (end int, known [4]jsonscan.Span, walked bool, err error) {
	r, err := jsonscan.OpenObject(b, at)
	if err == jsonscan.ErrNotObject {
		n, err := jsonscan.Value(b[at:])
		return at + n, known, false, err
	}
	if err != nil {
		return 0, known, false, err
	}
	for {
		more, err := r.Next()
		if err != nil {
			return 0, known, false, err
		}
		if !more {
			return r.End(), known, true, nil
		}
		end, err := r.Skip()
		if err != nil {
			return 0, known, false, err
		}
		if i := knownIndex(r.Key, keys); i >= 0 && known[i].To == 0 {
			known[i] = jsonscan.Span{From: uint32(r.ValAt - at), To: uint32(end - at)}
		}
		if cands != nil {
			cands.add(r.Key, r.ValAt, end)
		}
	}
}

// knownIndex is the index in keys of the raw key (quotes off, escapes
// kept), or -1. A key without a backslash decodes to itself, or, with
// invalid UTF-8, to something holding U+FFFD, which no known member's
// name holds: it is one of keys only as spelled. Only an escaped key is
// decoded (jsonscan.KeyIs), which walking every member of every section
// otherwise paid four times per member.
func knownIndex(raw []byte, keys *[4]string) int {
	for i, k := range keys {
		if string(raw) == k {
			return i
		}
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return -1
	}
	for i, k := range keys {
		if jsonscan.KeyIs(raw, k) {
			return i
		}
	}
	return -1
}

// span is a range of bytes, [from, to).
type span struct{ from, to int }

// spans holds ranges in increasing order, merging one that overlaps the
// last. The first two need no allocation.
type spans struct {
	n     int
	first [2]span
	more  []span
}

func (s *spans) add(c span) {
	if last := s.last(); last != nil && c.from <= last.to {
		last.to = max(last.to, c.to)
		return
	}
	if s.n < len(s.first) {
		s.first[s.n] = c
	} else {
		if s.more == nil {
			s.more = append([]span(nil), s.first[:]...)
		}
		s.more = append(s.more, c)
	}
	s.n++
}

func (s *spans) last() *span {
	switch {
	case s.n == 0:
		return nil
	case s.more != nil:
		return &s.more[len(s.more)-1]
	}
	return &s.first[s.n-1]
}

func (s *spans) all() []span {
	if s.more != nil {
		return s.more
	}
	return s.first[:s.n]
}

// readMetadata reads the metadata object at b[at:]: the key fields into o,
// all four in one allocation, the spans that remove managedFields (each
// with one adjacent comma) into cuts and, when known is not nil, where the
// first of each of knownMembers[0] is. It returns where the object ends.
func (o *Object) readMetadata(b []byte, at int, cuts *spans, known *[4]span) (end int, err error) {
	r, err := jsonscan.OpenObject(b, at)
	if err == jsonscan.ErrNotObject {
		return 0, fmt.Errorf("metadata: %w", jsonscan.SyntaxError(b, at, "not an object"))
	}
	if err != nil {
		return 0, err
	}
	var fields [4][]byte // namespace, name, resourceVersion, uid: JSON strings
	keptEnd := -1        // where the value of the last member kept ends
	for {
		more, err := r.Next()
		if err != nil {
			return 0, err
		}
		if !more {
			break
		}
		slot := -1
		switch string(r.Key) {
		case "namespace":
			slot = 0
		case "name":
			slot = 1
		case "resourceVersion":
			slot = 2
		case "uid":
			slot = 3
		}
		if string(r.Key) == "managedFields" { // half of a pod's bytes, never kept: brackets counted, not matched (jsonscan.Dropped)
			valEnd, err := r.SkipDropped()
			if err != nil {
				return 0, err
			}
			c, err := memberSpan(b, r.KeyAt, valEnd, keptEnd)
			if err != nil {
				return 0, err
			}
			cuts.add(c)
			continue
		}
		valEnd, err := r.Skip()
		if err != nil {
			return 0, err
		}
		keptEnd = valEnd
		if v := b[r.ValAt:valEnd]; slot >= 0 && v[0] == '"' { // null or not a string: as absent
			fields[slot] = v
		}
		if known != nil && slot < 0 {
			if i := knownIndex(r.Key, knownMembers[0]); i >= 0 && known[i].to == 0 {
				known[i] = span{r.ValAt, valEnd}
			}
		}
	}
	if err := o.setKeys(fields); err != nil {
		return 0, fmt.Errorf("metadata: %w", err)
	}
	return r.End(), nil
}

// setKeys decodes the JSON strings namespace, name, resourceVersion and
// uid into one allocation shared by the four fields.
func (o *Object) setKeys(fields [4][]byte) error {
	var plain [4][]byte
	size := 0
	for i, f := range fields {
		if len(f) == 0 {
			continue
		}
		if bytes.IndexByte(f, '\\') >= 0 {
			s, err := jsonscan.String(f)
			if err != nil {
				return err
			}
			plain[i] = []byte(s)
		} else {
			plain[i] = f[1 : len(f)-1]
		}
		size += len(plain[i])
	}
	var all strings.Builder
	all.Grow(size)
	for _, p := range plain {
		all.Write(p)
	}
	s := all.String()
	n0, n1, n2 := len(plain[0]), len(plain[0])+len(plain[1]), len(plain[0])+len(plain[1])+len(plain[2])
	o.namespace, o.name, o.resourceVersion, o.uid = s[:n0], s[n0:n1], s[n1:n2], s[n2:]
	return nil
}

// memberSpan is the bytes to delete to remove the member from keyAt to
// valEnd: from the end of the last member kept before it (taking the comma
// after that), or, when none was, from its key to the start of the next
// member, or to the value's end when it is the last.
func memberSpan(b []byte, keyAt, valEnd, keptEnd int) (span, error) {
	if keptEnd >= 0 {
		return span{keptEnd, valEnd}, nil
	}
	i := jsonscan.SkipSpace(b, valEnd)
	switch {
	case i >= len(b):
		return span{}, jsonscan.ErrShort
	case b[i] == ',':
		return span{keyAt, jsonscan.SkipSpace(b, i+1)}, nil
	}
	return span{keyAt, valEnd}, nil // the last member ('}' is checked by the caller's next)
}

func skipSpaceBack(b []byte, i int) int {
	for i >= 0 && jsonscan.IsSpace(b[i]) {
		i--
	}
	return i
}
