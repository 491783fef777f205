package cache

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The pages of one walk through a question's answer come from one moment:
// the first page keeps its sorted matches (immutable objects, so each as it
// was then) and every continue token of the walk points into them. A walk
// sees each object that existed for its whole duration exactly once, and
// a later page costs what copying it costs, whatever its number.

// Bounds of the kept answers: how many, how many rows in all, how long.
// The oldest goes first when a bound is reached; a token into an answer
// gone is ErrExpired (410), as the API server answers a continue token
// older than its compaction.
const (
	maxWalks     = 256
	maxWalkRows  = 4_000_000
	walkLifetime = 5 * time.Minute
)

// ErrExpired: a continue token's answer is no longer kept (410).
var ErrExpired = errors.New("continue token expired")

// walks are a cache's kept answers.
type walks struct{ *pageStore[*walk] }

// walk is a question's sorted matches, as they were at its first page:
// rows, or the snapshot of an ordered index they are read from.
type walk struct {
	rows     []row
	ordered  *orderedWalk // nil: rows
	resource string
	sort     string
	// asked is what selected the rows, the caller's namespaces included
	// (askedBy): a token is answered only for the same question by a
	// caller confined to the same namespaces, never to one who may read
	// less.
	asked string
}

// askedBy is what selected a question's rows: its selection, the
// namespaces the caller is confined to, its filter and its sort.
func askedBy(q ListQuery) string {
	ns := "*"
	if q.Namespaces != nil {
		ns = strings.Join(slices.Sorted(slices.Values(q.Namespaces)), ",")
	}
	fs := ""
	if q.Fields != nil {
		fs = q.Fields.String()
	}
	return strings.Join([]string{q.Namespace, ns, q.LabelSelector, q.Index, q.Value, fs, q.Ask.FilterText, q.Ask.SortText}, "\x00")
}

func newWalks(now func() time.Time) walks {
	return walks{newPageStore(maxWalks, maxWalkRows, walkLifetime, (*walk).length, now)}
}

// keep stores rows and returns the walk's reference for tokens.
func (w walks) keep(resource, sort, asked string, rows []row) string {
	return w.add(&walk{rows: rows, resource: resource, sort: sort, asked: asked})
}

// keepOrdered stores a walk through an ordered index's snapshot.
func (w walks) keepOrdered(resource, sort, asked string, o *orderedWalk) string {
	return w.add(&walk{ordered: o, resource: resource, sort: sort, asked: asked})
}

// length is what a walk counts against maxWalkRows: its matches.
func (wk *walk) length() int {
	if wk.ordered != nil {
		return wk.ordered.total
	}
	return len(wk.rows)
}

// find returns the walk a token refers to; ok is false for another
// process's reference (the caller resumes from the live cache), err is
// ErrExpired for one of ours that is gone.
func (w walks) find(ref string) (*walk, bool, error) {
	wk, ours, found := w.pageStore.find(ref)
	if ours && !found {
		return nil, true, fmt.Errorf("%w: the answer this token pages through is no longer kept (at most %d answers, %s each); start the list again without it",
			ErrExpired, maxWalks, walkLifetime)
	}
	return wk, ours, nil
}
