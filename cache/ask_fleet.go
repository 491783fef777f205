package cache

import "github.com/kubeindex/kubeindex/query"

// What a caller merging the pages of several caches (a question across
// clusters) needs of each: the values it orders by, and a place to
// resume each cache where the merge stopped taking its items.

// SortValues are o's values of the question's sort keys, read as the
// question reads them (kept on o): what a merge compares.
func (a *Ask) SortValues(o *Object) []query.Value {
	return query.SortValues(a.Sort, record(o, a.Schema, a.Now))
}

// ContinueAfter is a continue token resuming the list of q that res is a
// page of after its first n items (1 ≤ n ≤ len(res.Items)), whose sort
// values are vs (nil without a question): the token a page ending there
// would carry. It stays in res's kept walk when res is a page of one
// (the walk's last page too), so the following pages are of the same
// moment; otherwise it resumes in the live cache after that item.
func (res ListResult) ContinueAfter(q ListQuery, n int, vs []query.Value) string {
	if n == len(res.Items) && res.Continue != "" {
		return res.Continue
	}
	last := res.Items[n-1]
	if q.Ask == nil {
		return encodeContinue(res.Resource.Name, last.Key())
	}
	tok := continueToken{Resource: res.Resource.Name, After: last.Key(), Asked: true, Sort: q.Ask.SortText, Values: vs}
	if res.walk != "" {
		tok.Walk, tok.Pos = res.walk, res.pos-len(res.Items)+n
	}
	return encodeToken(tok)
}
