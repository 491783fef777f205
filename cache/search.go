package cache

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/kubeindex/kubeindex/indexers"
	"github.com/kubeindex/kubeindex/internal/jsonscan"
	"github.com/kubeindex/kubeindex/ipowner"
)

// Search across resources (docs/query.md, "Search"): one text matched,
// case-insensitively, against every object's name, its label values and
// the addresses it holds (a pod's podIPs, a Service's, a Node's), ranked
// exact before prefix before substring, then by resource, namespace and
// name. Only names, label values and addresses are read: nothing of an
// object's spec, data or annotations, so a Secret's data never matches.

// SearchRank is how well a hit matched: lower is better.
type SearchRank uint8

const (
	RankExact SearchRank = iota
	RankPrefix
	RankSubstring
)

func (r SearchRank) String() string { return [...]string{"exact", "prefix", "substring"}[r] }

// SearchMatch is what of an object matched; of equally ranked matches,
// the name is reported before an address, an address before a label.
type SearchMatch uint8

const (
	MatchName SearchMatch = iota
	MatchIP
	MatchLabel
)

func (m SearchMatch) String() string { return [...]string{"name", "ip", "label"}[m] }

// MaxSearchText bounds the text searched for: the longest thing it can
// match is a name (a DNS subdomain, 253 characters).
const MaxSearchText = 253

// SearchTarget is one resource to search and where: Namespaces as
// ListQuery.Namespaces (nil: every namespace; empty: none).
type SearchTarget struct {
	Resource   string
	Namespaces []string
}

// SearchQuery is a search. The zero Targets searches every cached
// resource everywhere; an empty, non-nil Targets searches nothing.
type SearchQuery struct {
	Text      string
	Targets   []SearchTarget
	Namespace string // "" for all; cluster-scoped resources are left out when set
	Limit     int    // 0: every hit
	Continue  string
}

// SearchHit is one object found: the best of its matches, with what
// matched (Key: "metadata.name", the label's path, or the address's
// field) and the value that did.
type SearchHit struct {
	Resource   *Resource // the cache's, shared: read-only
	Object     *Object
	Rank       SearchRank
	Match      SearchMatch
	Key, Value string
}

// SearchResult is one page of hits. Total is the number of hits in all,
// the same on every page of a walk.
type SearchResult struct {
	Hits      []SearchHit
	Total     int
	Continue  string
	Remaining int
}

// searchCost is what a search reads per object in the budget's unit: its
// name and its labels, and its addresses when the text may be part of
// one.
func searchCost(ips bool) int {
	if ips {
		return 3
	}
	return 2
}

// Search answers q: the objects of q.Targets whose name, a label value
// or an address matches q.Text, one page at a time. A walk is one moment,
// as a question's (ask_pages.go): the first page keeps every hit and its
// continue token pages through them. Its cost is bounded as questions'
// (QueryBudget, the slots for costly ones). Safe for concurrent use.
func (c *Cache) Search(q SearchQuery) (SearchResult, error) {
	var out SearchResult
	sq, err := compileSearch(q.Text)
	if err != nil {
		return out, err
	}
	targets, err := c.searchTargets(q)
	if err != nil {
		return out, err
	}
	if q.Limit < 0 {
		return out, fmt.Errorf("%w: limit must not be negative", ErrInvalid)
	}
	asked := searchAsked(sq.text, q.Namespace, targets)
	tok, err := decodeSearchToken(q.Continue, asked)
	if err != nil {
		return out, err
	}
	if tok.Walk != "" {
		hits, ours, err := c.searches.find(tok.Walk, asked)
		if err != nil {
			return out, err
		}
		if ours {
			if tok.Pos > len(hits) {
				return out, fmt.Errorf("%w: continue token is malformed; start the search again without it", ErrInvalid)
			}
			return searchPage(hits, tok.Pos, q.Limit, tok.Walk, asked), nil
		}
	}
	hits, err := c.searchAll(sq, q.Namespace, targets)
	if err != nil {
		return out, err
	}
	start := 0
	if tok.After != nil {
		start, _ = slices.BinarySearchFunc(hits, *tok.After, func(h SearchHit, at searchPlace) int {
			if c := compareHitPlace(placeOf(h), at); c != 0 {
				return c
			}
			return -1 // the hit at the token's place was on the last page
		})
	}
	walk := ""
	if q.Limit > 0 && len(hits)-start > q.Limit {
		walk = c.searches.keep(hits, asked)
	}
	return searchPage(hits, start, q.Limit, walk, asked), nil
}

// searchTarget is a resource to search, resolved.
type searchTarget struct {
	r          *resourceCache
	namespaces []string
}

// searchTargets resolves q's targets (every resource when nil), each
// once, leaving out cluster-scoped ones when a namespace is asked.
func (c *Cache) searchTargets(q SearchQuery) ([]searchTarget, error) {
	ts := q.Targets
	if ts == nil {
		for _, r := range c.resources {
			ts = append(ts, SearchTarget{Resource: r.res.Name})
		}
	}
	var out []searchTarget
	for _, t := range ts {
		r, err := c.resource(t.Resource)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(have searchTarget) bool { return have.r == r }) {
			return nil, fmt.Errorf("%w: resource %s is named twice", ErrInvalid, r.res.Name)
		}
		if q.Namespace != "" && !r.res.Namespaced {
			continue
		}
		if !r.synced() {
			return nil, fmt.Errorf("%s: %w", r.res.Name, ErrNotSynced)
		}
		out = append(out, searchTarget{r: r, namespaces: t.Namespaces})
	}
	slices.SortFunc(out, func(a, b searchTarget) int { return strings.Compare(a.r.res.Name, b.r.res.Name) })
	return out, nil
}

// searchText is a compiled search text.
type searchText struct {
	text string // lower case (ASCII), trimmed
	// addr is the normalized address when the text is a whole one: it
	// matches addresses exactly, through the owner table where it holds
	// the resource.
	addr string
	// ipFragment: the text may be part of an address's spelling (digits,
	// hex letters, dots and colons only), so addresses are read.
	ipFragment bool
}

// compileSearch reads a search text; the server words the errors it
// checks first (it names the parameter).
func compileSearch(s string) (searchText, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return searchText{}, fmt.Errorf("%w: the search text is empty", ErrInvalid)
	case len(s) > MaxSearchText:
		return searchText{}, fmt.Errorf("%w: the search text is longer than %d bytes", ErrInvalid, MaxSearchText)
	}
	st := searchText{text: lowerASCII(s)}
	if addr, ok := indexers.NormalizeIP(s); ok {
		st.addr = addr
	} else {
		st.ipFragment = strings.Trim(st.text, "0123456789abcdef.:") == ""
	}
	return st, nil
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// rankOf is how s matches text (lower case), ASCII letters compared
// without case.
func rankOf[S ~string | ~[]byte](s S, text string) (SearchRank, bool) {
	n, m := len(s), len(text)
	for i := 0; i+m <= n; i++ {
		j := 0
		for j < m && foldASCII(s[i+j]) == text[j] {
			j++
		}
		if j == m {
			switch {
			case i == 0 && n == m:
				return RankExact, true
			case i == 0:
				return RankPrefix, true
			}
			return RankSubstring, true
		}
	}
	return 0, false
}

func foldASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// searchAll finds every hit of the targets, ordered.
func (c *Cache) searchAll(sq searchText, namespace string, targets []searchTarget) ([]SearchHit, error) {
	type selected struct {
		t     searchTarget
		items []*Object
		kind  ipowner.Kind
		ips   bool // read addresses from the objects
		table bool // take addresses from the owner table
	}
	var sel []selected
	cost := 0
	for _, t := range targets {
		s := selected{t: t}
		var err error
		if _, s.items, err = c.selection(t.r.res.Name, ListQuery{Namespace: namespace, Namespaces: t.namespaces}); err != nil {
			return nil, err
		}
		kind, holds := ownerKind(t.r.res)
		s.kind = kind
		switch {
		case !holds:
		case sq.addr != "" && c.owners != nil && c.answering(kind) == t.r:
			s.table = true
		case sq.addr != "" || sq.ipFragment:
			s.ips = true
		}
		cost += len(s.items) * searchCost(s.ips)
		sel = append(sel, s)
	}
	release, err := c.asks.take(cost)
	if err != nil {
		return nil, err
	}
	defer release()
	var hits []SearchHit
	for _, s := range sel {
		first := len(hits)
		for _, o := range s.items {
			if h, ok := matchObject(sq, s.t.r, o, s.kind, s.ips); ok {
				hits = append(hits, h)
			}
		}
		if s.table {
			byKey := map[string]int{} // a table's holder may be an object the scan found too
			for i := first; i < len(hits); i++ {
				byKey[hits[i].Object.Key()] = i
			}
			for _, h := range c.tableHits(sq.addr, s.t, s.kind, namespace) {
				if i, ok := byKey[h.Object.Key()]; ok {
					if compareMatch(h, hits[i]) < 0 {
						hits[i] = h
					}
					continue
				}
				hits = append(hits, h)
			}
		}
	}
	slices.SortFunc(hits, func(a, b SearchHit) int { return compareHitPlace(placeOf(a), placeOf(b)) })
	return hits, nil
}

// matchObject is o's best match, if any.
func matchObject(sq searchText, r *resourceCache, o *Object, kind ipowner.Kind, ips bool) (SearchHit, bool) {
	best := SearchHit{Resource: &r.res, Object: o}
	found := false
	offer := func(rank SearchRank, m SearchMatch, key, value string) {
		h := SearchHit{Resource: &r.res, Object: o, Rank: rank, Match: m, Key: key, Value: value}
		if !found || compareMatch(h, best) < 0 {
			best, found = h, true
		}
	}
	if rank, ok := rankOf(o.Name(), sq.text); ok {
		offer(rank, MatchName, "metadata.name", o.Name())
	}
	if !found || best.Rank != RankExact {
		matchLabels(sq.text, o, offer)
	}
	if ips {
		for _, h := range objectAddresses(kind, o) {
			switch {
			case sq.addr != "":
				if h.IP == sq.addr {
					offer(RankExact, MatchIP, h.key, h.IP)
				}
			default:
				if rank, ok := rankOf(h.IP, sq.text); ok {
					offer(rank, MatchIP, h.key, h.IP)
				}
			}
		}
	}
	return best, found
}

// matchLabels offers each label value that matches.
func matchLabels(text string, o *Object, offer func(SearchRank, SearchMatch, string, string)) {
	md := o.doc("metadata")
	labels := md.Member("labels")
	if len(labels) == 0 || labels[0] != '{' {
		return
	}
	obj, err := jsonscan.OpenObject(labels, 0)
	if err != nil {
		return
	}
	for {
		more, err := obj.Next()
		if err != nil || !more {
			return
		}
		rawKey, at := obj.Key, obj.ValAt
		end, err := obj.Skip()
		if err != nil {
			return
		}
		v := labels[at:end]
		if len(v) < 2 || v[0] != '"' {
			continue
		}
		if rank, ok := rankOf(v[1:len(v)-1], text); ok || hasEscape(v) {
			value, err := jsonscan.String(v)
			if err != nil {
				continue
			}
			if rank, ok = rankOf(value, text); !ok {
				continue
			}
			key := string(rawKey)
			if hasEscape(rawKey) {
				if key, err = jsonscan.String(labels[obj.KeyAt : obj.KeyAt+len(rawKey)+2]); err != nil {
					continue
				}
			}
			offer(rank, MatchLabel, "metadata.labels."+escapePath(key), value)
		}
	}
}

func hasEscape(b []byte) bool { return slices.Contains(b, '\\') }

// escapePath escapes a member name for a gjson path, as keys take it
// (metadata.labels.app\.kubernetes\.io/name).
func escapePath(name string) string {
	if !strings.ContainsAny(name, ".*?|#@\\!=<>%") {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if strings.IndexByte(".*?|#@\\!=<>%", name[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	return b.String()
}

// heldAt is an address an object holds and the field it is read from.
type heldAt struct{ IP, key string }

// roleKeys are the fields each role of an address is read from.
var roleKeys = map[ipowner.Role]string{
	ipowner.RolePodIP:        "status.podIPs",
	ipowner.RoleClusterIP:    "spec.clusterIPs",
	ipowner.RoleExternalIP:   "spec.externalIPs",
	ipowner.RoleLoadBalancer: "status.loadBalancer.ingress",
	ipowner.RoleNodeInternal: "status.addresses",
	ipowner.RoleNodeExternal: "status.addresses",
}

// objectAddresses reads the addresses o holds with the readers the owner
// table is fed by (addresses_feed.go), so both ways agree.
func objectAddresses(kind ipowner.Kind, o *Object) []heldAt {
	var out []heldAt
	switch kind {
	case ipowner.Pod:
		for _, ip := range indexers.PodIPsOf(o.doc("status")) {
			out = append(out, heldAt{ip, roleKeys[ipowner.RolePodIP]})
		}
	case ipowner.Service:
		for _, h := range ipowner.ServiceAddresses(o.doc("spec"), o.doc("status")) {
			out = append(out, heldAt{h.IP, roleKeys[h.Role]})
		}
	case ipowner.Node:
		for _, h := range ipowner.NodeAddresses(o.doc("status")) {
			out = append(out, heldAt{h.IP, roleKeys[h.Role]})
		}
	}
	return out
}

// tableHits are the holders of addr of t's kind, from the owner table,
// where t may read.
func (c *Cache) tableHits(addr string, t searchTarget, kind ipowner.Kind, namespace string) []SearchHit {
	var a ipowner.Answer[*Object]
	if c.owners.LookupInto(ipowner.Query{IP: addr}, &a) != nil {
		return nil
	}
	owners, items := a.Pods, a.Items
	switch kind {
	case ipowner.Service:
		owners, items = a.Services, a.ServiceItems
	case ipowner.Node:
		owners, items = a.Nodes, a.NodeItems
	}
	var scope func(string) bool
	if t.namespaces != nil {
		scope = namespaceSet(t.namespaces)
	}
	var out []SearchHit
	for i, ow := range owners {
		if namespace != "" && ow.Namespace != namespace {
			continue
		}
		if scope != nil && !scope(ow.Namespace) {
			continue
		}
		out = append(out, SearchHit{Resource: &t.r.res, Object: items[i], Rank: RankExact, Match: MatchIP, Key: roleKeys[ow.Role], Value: a.IP})
	}
	return out
}

// compareMatch orders two matches of one object: the better first.
func compareMatch(a, b SearchHit) int {
	return cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Match, b.Match), strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value))
}

// searchPlace is where a hit is in a search's order.
type searchPlace struct {
	Rank      SearchRank `json:"k"`
	Resource  string     `json:"r"`
	Namespace string     `json:"n,omitempty"`
	Name      string     `json:"m"`
}

func placeOf(h SearchHit) searchPlace {
	return searchPlace{h.Rank, h.Resource.Name, h.Object.Namespace(), h.Object.Name()}
}

func compareHitPlace(a, b searchPlace) int {
	return cmp.Or(cmp.Compare(a.Rank, b.Rank), strings.Compare(a.Resource, b.Resource),
		strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// searchPage is hits[start:] limited to limit, with a token into walk
// when more follow.
func searchPage(hits []SearchHit, start, limit int, walk, asked string) SearchResult {
	out := SearchResult{Total: len(hits)}
	hits = hits[start:]
	if limit > 0 && len(hits) > limit {
		out.Remaining = len(hits) - limit
		hits = hits[:limit]
		last := placeOf(hits[len(hits)-1])
		out.Continue = encodeSearchToken(searchToken{Asked: askedHash(asked), After: &last, Walk: walk, Pos: start + limit})
	}
	out.Hits = slices.Clone(hits)
	return out
}

// searchAsked is what selected a search's hits: its text, namespace,
// and each resource with the namespaces its caller may read there.
func searchAsked(text, namespace string, targets []searchTarget) string {
	parts := []string{text, namespace}
	for _, t := range targets {
		ns := "*"
		if t.namespaces != nil {
			ns = strings.Join(slices.Compact(slices.Sorted(slices.Values(t.namespaces))), ",")
		}
		parts = append(parts, t.r.res.Name+"="+ns)
	}
	return strings.Join(parts, "\x00")
}
