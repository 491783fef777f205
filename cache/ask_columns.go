package cache

import (
	"time"

	"github.com/kubeindex/kubeindex/query"
)

// keptColumns are an object's Table column values under one schema.
// Rendering a row decodes the whole object, by far the largest cost of a
// question over a column; an object is immutable, so its values are made
// at the first question that reads a column and kept with it until it is
// replaced by its next version (BenchmarkQuestions, cold and warm).
type keptColumns struct {
	fingerprint string
	values      []query.Value
}

// record is o as a question reads it, its column values kept on o when
// the schema allows (Schema.Timeless).
func record(o *Object, sc *query.Schema, now time.Time) *query.Record {
	return sc.RecordWith(o.Namespace(), o.Name(), o.Raw(), now, func() []query.Value {
		fp := sc.Fingerprint()
		if k := o.columns.Load(); k != nil && k.fingerprint == fp {
			return k.values
		}
		vs := sc.ColumnValues(o.Raw(), now)
		if sc.Timeless() {
			o.columns.Store(&keptColumns{fingerprint: fp, values: vs})
		}
		return vs
	})
}
