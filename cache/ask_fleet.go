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
// page of after its first n items (0 ≤ n ≤ len(res.Items)), whose sort
// values are vs (nil without a question, and for n = 0): the token a
// page ending there would carry. For n = 0 it is the place before the
// page's first item: the token the page was asked with, or, for a first
// page, the place before its walk's first match ("" for a first page
// asked with an offset: no such place is kept).
//
// A page of a question is of one moment, and so is every token made
// here: it stays in res's kept walk (the walk's last page too), and a
// first page that holds every match, which keeps no walk of its own, is
// kept as one now. Only a page that is neither (a later page answered
// from the live cache, for another process's token) resumes in the live
// cache after that item. It records the walk kept in res.
func (res *ListResult) ContinueAfter(q ListQuery, n int, vs []query.Value) string {
	if n == len(res.Items) && res.Continue != "" {
		return res.Continue
	}
	if n == 0 && q.Continue != "" {
		return q.Continue
	}
	if q.Ask == nil {
		if n == 0 {
			return "" // a plain list's first page starts at its beginning
		}
		return encodeContinue(res.Resource.Name, res.Items[n-1].Key())
	}
	if res.walk == "" && res.keeper != nil && q.Continue == "" && res.Total == len(res.Items) && len(res.Values) == len(res.Items) {
		rows := make([]row, len(res.Items))
		for i, o := range res.Items {
			rows[i] = row{o, res.Values[i]}
		}
		res.walk, res.pos = res.keeper.walks.keep(res.Resource.Name, q.Ask.SortText, askedBy(q), rows), len(rows)
	}
	if n == 0 {
		if res.walk == "" || q.Ask.Offset > 0 {
			return "" // nothing kept to start in (a page with no match), or not at its start: none
		}
		return encodeToken(continueToken{Resource: res.Resource.Name, Asked: true, Sort: q.Ask.SortText, Walk: res.walk})
	}
	tok := continueToken{Resource: res.Resource.Name, After: res.Items[n-1].Key(), Asked: true, Sort: q.Ask.SortText, Values: vs}
	if res.walk != "" {
		tok.Walk, tok.Pos = res.walk, res.pos-len(res.Items)+n
	}
	return encodeToken(tok)
}
