package cache

import (
	"io"
	"sync"

	"github.com/kubeindex/kubeindex/internal/jsonscan"
)

// An object's bytes are o.own with each of o.chunks' bytes inserted where
// it says, in order: the pieces. Most objects have no chunk and their bytes
// are o.own. Readers get them as the writers need them: in pieces for a
// vectored or buffered write (Pieces, WriteTo, AppendTo), or contiguous
// for a parser (Raw, joined when the object has chunks).

// chunkAt is a chunk of an object, inserted at offset at of its own.
type chunkAt struct {
	at uint32
	c  *chunk
}

// chunkList are an object's chunks, in order, in one allocation with the
// Object's pointer to it for the usual one or two (a pointer keeps every
// Object, chunked or not, within its allocation class).
type chunkList struct {
	list  []chunkAt
	first [2]chunkAt
}

// chunkRefs returns the object's chunks, in order.
func (o *Object) chunkRefs() []chunkAt {
	if o.chunks == nil {
		return nil
	}
	return o.chunks.list
}

// Len returns the length of the object's JSON.
func (o *Object) Len() int {
	n := len(o.own)
	for _, c := range o.chunkRefs() {
		n += len(c.c.b)
	}
	return n
}

// Chunked reports whether the object's JSON is held in more than one
// piece (Pieces), so that Raw joins them.
func (o *Object) Chunked() bool { return o.chunks != nil }

// Pieces appends the object's JSON to dst in consecutive pieces, which
// the caller must not modify, and returns dst: one piece for most objects.
func (o *Object) Pieces(dst [][]byte) [][]byte {
	at := uint32(0)
	for _, c := range o.chunkRefs() {
		if c.at > at {
			dst = append(dst, o.own[at:c.at])
		}
		dst = append(dst, c.c.b)
		at = c.at
	}
	if int(at) < len(o.own) || o.chunks == nil {
		dst = append(dst, o.own[at:])
	}
	return dst
}

// maxChunks is the most chunks an object has.
const maxChunks = 12

// maxPieces is the most pieces an object has: its chunks and the bytes
// around them.
const maxPieces = 2*maxChunks + 1

// AppendTo appends the object's JSON to dst.
func (o *Object) AppendTo(dst []byte) []byte {
	if o.chunks == nil {
		return append(dst, o.own...)
	}
	var buf [maxPieces][]byte
	for _, p := range o.Pieces(buf[:0]) {
		dst = append(dst, p...)
	}
	return dst
}

// WriteTo writes the object's JSON to w, piece by piece.
func (o *Object) WriteTo(w io.Writer) (int64, error) {
	var buf [maxPieces][]byte
	var total int64
	for _, p := range o.Pieces(buf[:0]) {
		n, err := w.Write(p)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// flat returns the object's JSON contiguous: raw, or, for an object with
// chunks, the pieces joined into a new slice, which the caller owns.
func (o *Object) flat() []byte {
	if o.chunks == nil {
		return o.own
	}
	return o.AppendTo(make([]byte, 0, o.Len()))
}

// span returns the object's bytes [from, to): a slice of raw or of a chunk
// when one piece holds them (then contiguous is true), else the pieces
// that hold them, cut to the range.
func (o *Object) span(from, to uint32) (b []byte, pieces [][]byte) { return o.spanIn(from, to, nil) }

// spanIn is span with the pieces in dst's array (from its start) when
// it has room: a caller that keeps nothing of them makes no slice.
func (o *Object) spanIn(from, to uint32, dst [][]byte) (b []byte, pieces [][]byte) {
	if o.chunks == nil {
		return o.own[from:to], nil
	}
	var buf [maxPieces][]byte
	all := o.Pieces(buf[:0])
	at := uint32(0) // where the current piece starts in the object's bytes
	for _, p := range all {
		end := at + uint32(len(p))
		if from >= at && to <= end {
			return p[from-at : to-at], nil
		}
		if end > from && at < to {
			if pieces == nil {
				pieces = dst[:0]
				if cap(pieces) < len(all) {
					pieces = make([][]byte, 0, len(all))
				}
			}
			pieces = append(pieces, p[max(from, at)-at:min(to, end)-at])
		}
		at = end
	}
	return nil, pieces
}

// sectionDoc is the Doc of the object's bytes [from, to), a section whose
// known members are known: contiguous when one piece holds it, else in
// pieces (a chunk is a member's whole value, so each known member's value
// lies within one piece), those in dst's array when it has room.
func (o *Object) sectionDoc(from, to uint32, dst [][]byte) jsonscan.Doc {
	b, parts := o.spanIn(from, to, dst)
	if parts != nil {
		return jsonscan.Doc{Pieces: parts}
	}
	return jsonscan.Doc{Raw: b}
}

// joinBuffers are scratch buffers for flatInto.
var joinBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// putJoinBuffer returns b to joinBuffers unless an outsized object grew it.
func putJoinBuffer(b *[]byte) {
	if cap(*b) <= 64<<10 {
		joinBuffers.Put(b)
	}
}

// flatInto is flat for a reader that keeps nothing of what it reads (or
// copies what it keeps): an object with chunks is joined into *scratch,
// grown as needed, which the next call reuses.
func (o *Object) flatInto(scratch *[]byte) []byte {
	if o.chunks == nil {
		return o.own
	}
	*scratch = o.AppendTo((*scratch)[:0])
	return *scratch
}

// recordRaw is the raw of a query.Record filled with a Kept, which reads
// everything through the Kept (query.Schema.Fill): the object's JSON when
// it is at hand without joining, else nil.
func (o *Object) recordRaw() []byte {
	if o.chunks == nil {
		return o.own
	}
	return nil
}
