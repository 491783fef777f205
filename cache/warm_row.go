package cache

import (
	"slices"

	"github.com/kubeindex/kubeindex/internal/table"
)

// A pod's row, in the column warmer's pass, is read from a copy of the
// pod in which the values the row's scan passes over unread are stand-ins
// it reads alike: its metadata's labels, annotations and owner references
// an empty object (or array), and its spec's containers, of which the
// printer reads only their number, an array of as many empty objects
// (table.PodContainersStandIn). Their places are those Build recorded
// (Object.known), and the copy, shorter than the pod (the containers
// alone are about half of it), replaces the pod's joined bytes: the scan
// reads a third of the bytes it read. The containers are held by the
// pods of one controller in the same chunks (object_chunks.go), around
// their token volume's name, so their stand-in is read once per worker
// and chunks, not once per pod.
//
// The copy's row is the pod's: the object passed Build, whose walk
// checked that every value in it closes its strings and matches its
// brackets, so the scan passes over a replaced object or array of the
// pod as over its stand-in (jsonscan.Dropped ends both where Build did);
// the containers' stand-in is what the table's own reading of them made
// (and only when it reads them); and the bytes between a chunk and the
// next, the pod's own (a token volume's name), are taken only when they
// lie within a string and hold no quote, backslash or control
// character, so that the chunks alone say how the value reads. When the
// scan does not read the copy it would not have read the pod either, and
// the pod's own bytes are read as before (scan, then decode). Held by
// TestWarmedPodRowsReadAsThePods.

// standIn is a replaced value: the object's bytes [from, to) and what
// stands in for them.
type standIn struct {
	from, to uint32
	text     []byte
}

var emptyObject, emptyArray = []byte("{}"), []byte("[]")

// maxContainerKeys bounds what a worker remembers of the containers it
// read: beyond, it forgets them all.
const maxContainerKeys = 4096

// containersKey names a pod's containers held in chunks: the chunks of
// the value, in order (the value starts with the first and ends with the
// last, each whole), the bytes between them plain string content of the
// pod's own.
type containersKey [4]*chunk

// podRows makes the copies a worker reads pods' rows from; one goroutine
// uses one.
type podRows struct {
	// read are the containers' stand-ins by their chunks; nil: the scan
	// does not read them.
	read   map[containersKey][]byte
	value  []byte // a containers' value joined, to read it
	text   []byte // the stand-in of containers read from their value
	spans  []standIn
	pieces []piece
}

// piece is part of an object's bytes and the chunk it is (nil: the
// object's own).
type piece struct {
	b []byte
	c *chunk
}

// copyOf returns in *scratch the copy of o a row is read from, ok
// when anything in it stands in for the pod's own bytes (else the
// caller reads the pod).
func (pr *podRows) copyOf(o *Object, scratch *[]byte) (raw []byte, ok bool) {
	pr.spans = pr.spans[:0]
	if meta := o.sections[0]; meta.to != 0 && o.walked[0] {
		mb, _ := o.span(meta.from, meta.to) // nil when in pieces, which metadata never is
		for i, sp := range o.known[0].spans() {
			if mb == nil || i == 0 || sp.To == 0 || sp.To-sp.From <= 2 { // creationTimestamp is read
				continue
			}
			from, to := meta.from+sp.From, meta.from+sp.To
			switch mb[sp.From] {
			case '{':
				pr.spans = append(pr.spans, standIn{from, to, emptyObject})
			case '[':
				pr.spans = append(pr.spans, standIn{from, to, emptyArray})
			}
		}
	}
	if spec := o.sections[1]; spec.to != 0 && o.walked[1] {
		if sp := o.known[1].spans()[1]; sp.To != 0 { // containers
			from, to := spec.from+sp.From, spec.from+sp.To
			text, read := pr.containers(o, from, to)
			if !read {
				return nil, false // the scan would not read the pod
			}
			pr.spans = append(pr.spans, standIn{from, to, text})
		}
	}
	if len(pr.spans) == 0 {
		return nil, false
	}
	slices.SortFunc(pr.spans, func(a, b standIn) int { return int(a.from) - int(b.from) })
	dst := (*scratch)[:0]
	at := uint32(0)
	for _, s := range pr.spans {
		dst = o.appendRange(dst, at, s.from)
		dst = append(dst, s.text...)
		at = s.to
	}
	*scratch = o.appendRange(dst, at, uint32(o.Len()))
	return *scratch, true
}

// containers is the stand-in of o's containers, the object's bytes
// [from, to): read once per chunks that hold it whole, else from the
// value; false when the scan does not read the value.
func (pr *podRows) containers(o *Object, from, to uint32) ([]byte, bool) {
	pr.pieces = o.piecesIn(pr.pieces[:0], from, to)
	if len(pr.pieces) == 0 {
		return nil, false
	}
	key, keyed := containersKeyOf(pr.pieces)
	if keyed {
		if text, ok := pr.read[key]; ok {
			return text, text != nil
		}
	}
	v := pr.pieces[0].b
	if len(pr.pieces) > 1 {
		pr.value = pr.value[:0]
		for _, p := range pr.pieces {
			pr.value = append(pr.value, p.b...)
		}
		v = pr.value
	}
	text, read := table.PodContainersStandIn(pr.text[:0], v)
	pr.text = text
	if !keyed || !withinStrings(pr.pieces) {
		return text, read
	}
	if pr.read == nil || len(pr.read) >= maxContainerKeys {
		pr.read = map[containersKey][]byte{}
	}
	if read {
		text = slices.Clone(text)
	} else {
		text = nil
	}
	pr.read[key] = text
	return text, read
}

// containersKeyOf is the key of a value in these pieces: false when it
// does not start and end with whole chunks, has more than the key holds,
// or has bytes of its own between them that are not plain string
// content (a quote, a backslash or a control character).
func containersKeyOf(pieces []piece) (key containersKey, ok bool) {
	if len(pieces) == 0 || pieces[0].c == nil || pieces[len(pieces)-1].c == nil {
		return key, false
	}
	n := 0
	for _, p := range pieces {
		if p.c == nil {
			if !plainText(p.b) {
				return key, false
			}
			continue
		}
		if len(p.b) != len(p.c.b) || n == len(key) {
			return key, false
		}
		key[n] = p.c
		n++
	}
	return key, true
}

// plainText reports whether b holds no quote, backslash or control
// character: inside a string, it neither ends it nor escapes what
// follows.
func plainText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// withinStrings reports whether each of the object's own pieces (plain
// text: containersKeyOf) starts inside a string of the JSON the pieces
// make, not escaped: then the chunks alone decide what every byte
// outside strings is, whatever plain text lies between them. A
// backslash outside strings (not JSON, read differently by different
// readers) makes it false.
func withinStrings(pieces []piece) bool {
	var inStr, escaped bool
	for _, p := range pieces {
		if p.c == nil {
			if !inStr || escaped {
				return false
			}
			continue // plain text: the state goes on as it was
		}
		for _, c := range p.b {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				if !inStr {
					return false
				}
				escaped = true
			case c == '"':
				inStr = !inStr
			}
		}
	}
	return true
}

// piecesIn appends to dst the pieces of the object's bytes [from, to), in
// order, cut to the range.
func (o *Object) piecesIn(dst []piece, from, to uint32) []piece {
	pos, own := uint32(0), uint32(0) // where the next piece starts, in the object and in o.own
	add := func(b []byte, c *chunk) {
		end := pos + uint32(len(b))
		if len(b) > 0 && end > from && pos < to {
			dst = append(dst, piece{b[max(from, pos)-pos : min(to, end)-pos], c})
		}
		pos = end
	}
	for _, c := range o.chunkRefs() {
		add(o.own[own:c.at], nil)
		own = c.at
		add(c.c.b, c.c)
	}
	add(o.own[own:], nil)
	return dst
}

// appendRange appends the object's bytes [from, to) to dst.
func (o *Object) appendRange(dst []byte, from, to uint32) []byte {
	var buf [maxPieces][]byte
	b, pieces := o.spanIn(from, to, buf[:0])
	if pieces == nil {
		return append(dst, b...)
	}
	for _, p := range pieces {
		dst = append(dst, p...)
	}
	return dst
}
