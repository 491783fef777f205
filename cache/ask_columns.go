package cache

import (
	"slices"
	"time"

	"github.com/kubeindex/kubeindex/query"
)

// keptValues are what questions have read of one version of an object:
// its Table column values under one schema, and the values of up to
// maxKeptPaths path (or age) keys. Rendering a row decodes the whole
// object, by far the largest cost of a question over a column, and a
// path is a parse of the JSON; an object is immutable, so its values are
// made at the first question that reads them and kept with it until it
// is replaced by its next version (BenchmarkQuestions, cold and warm).
// A keptValues is immutable: a reader that keeps more stores a new one.
type keptValues struct {
	fingerprint string // of columns' schema; "" with no columns
	columns     []query.Value
	paths       []keptPath
}

// keptPath is one key's values (query.Key.KeptName names it).
type keptPath struct {
	name   string
	values []query.Value
}

// maxKeptPaths bounds the path keys kept per object: beyond, a key is
// read from the JSON at each question.
const maxKeptPaths = 8

// kept is an object's query.Kept under one schema; a scan reuses one.
type kept struct {
	o   *Object
	sc  *query.Schema
	now time.Time
}

var _ query.Kept = (*kept)(nil)

// Columns are the object's column values, kept when the schema allows
// (Schema.Timeless).
func (k *kept) Columns() []query.Value {
	fp := k.sc.Fingerprint()
	old := k.o.columns.Load()
	if old != nil && old.fingerprint == fp && old.columns != nil {
		return old.columns
	}
	var vs []query.Value
	if k.o.Chunked() {
		scratch := joinBuffers.Get().(*[]byte)
		vs = k.sc.ColumnValues(k.o.flatInto(scratch), k.now) // it copies what it keeps
		putJoinBuffer(scratch)
	} else {
		vs = k.sc.ColumnValues(k.o.own, k.now)
	}
	if !k.sc.Timeless() {
		return vs
	}
	return k.keep(vs)
}

// kept are the object's column values kept under k.sc, nil when there
// are none (they are not made).
func (k *kept) kept() []query.Value {
	if kv := k.o.columns.Load(); kv != nil && kv.fingerprint == k.sc.Fingerprint() {
		return kv.columns
	}
	return nil
}

// keep stores vs, the object's column values under a Timeless schema, on
// the object, and returns what it keeps: vs, or the values another
// reader kept first.
func (k *kept) keep(vs []query.Value) []query.Value {
	fp := k.sc.Fingerprint()
	old := k.o.columns.Load()
	for {
		nk := &keptValues{fingerprint: fp, columns: vs}
		if old != nil {
			nk.paths = old.paths
		}
		if k.o.columns.CompareAndSwap(old, nk) {
			return vs
		}
		if old = k.o.columns.Load(); old != nil && old.fingerprint == fp && old.columns != nil {
			return old.columns
		}
	}
}

// keepWith stores on the object, in one keptValues, vs (its column
// values under a Timeless schema; nil: keep those it has) and the values
// of more path keys (beside those kept, up to maxKeptPaths): the column
// warmer's pass keeps both at once, leaving no intermediate value to
// collect.
func (k *kept) keepWith(vs []query.Value, add []keptPath) {
	fp := k.sc.Fingerprint()
	old := k.o.columns.Load()
	for {
		nk := &keptValues{fingerprint: fp, columns: vs}
		if old != nil && old.fingerprint == fp && old.columns != nil {
			nk.columns = old.columns // what readers may hold already
		}
		if nk.columns == nil {
			return // nothing to keep the paths with
		}
		if old != nil {
			nk.paths = old.paths
		}
		for _, p := range add {
			if len(nk.paths) < maxKeptPaths && !old.holds(p.name) {
				nk.paths = append(slices.Clip(nk.paths), p) // a new array: old's is read meanwhile
			}
		}
		if k.o.columns.CompareAndSwap(old, nk) {
			return
		}
		old = k.o.columns.Load()
	}
}

// holds reports whether kv keeps the values of the path (or age) key of
// this kept name.
func (kv *keptValues) holds(name string) bool {
	if kv == nil {
		return false
	}
	for _, p := range kv.paths {
		if p.name == name {
			return true
		}
	}
	return false
}

// Read returns a path or age key's values, kept after the first read;
// an age's are the kept column values' own when the object has them
// (query.Schema.KeptColumn), shared rather than kept twice.
func (k *kept) Read(key query.Key) []query.Value {
	if i, ok := k.sc.KeptColumn(key); ok {
		if cols := k.kept(); i < len(cols) {
			if cols[i].IsMissing() {
				return nil // as the JSON read: no value
			}
			return cols[i : i+1 : i+1]
		}
	}
	name := key.KeptName()
	old := k.o.columns.Load()
	var vs []query.Value
	read := false
	for {
		if old != nil {
			for _, p := range old.paths {
				if p.name == name {
					return p.values
				}
			}
		}
		if !read {
			vs, read = key.ReadJSON(k.o.flat()), true
		}
		if old != nil && len(old.paths) >= maxKeptPaths {
			return vs
		}
		nk := &keptValues{paths: []keptPath{{name, vs}}}
		if old != nil {
			nk.fingerprint, nk.columns = old.fingerprint, old.columns
			nk.paths = append(append(make([]keptPath, 0, len(old.paths)+1), old.paths...), nk.paths[0])
		}
		if k.o.columns.CompareAndSwap(old, nk) {
			return vs
		}
		old = k.o.columns.Load()
	}
}

// record is o as a question reads it, its values kept on o.
func record(o *Object, sc *query.Schema, now time.Time) *query.Record {
	r := &query.Record{}
	sc.Fill(r, o.namespace, o.name, o.recordRaw(), now, &kept{o: o, sc: sc, now: now})
	return r
}
