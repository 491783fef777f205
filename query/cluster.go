package query

// A question across clusters asks each cluster for its part and merges
// the parts. Its keys may name ClusterKey, the cluster an object is in:
// no object holds that value, so each cluster is asked the question with
// its cluster's terms decided (Filter.InCluster) and its cluster keys
// left out of the sort and the groups (Local); whoever merges the parts
// puts the cluster's name where those keys were (ClusterValues).

// ClusterKey names the cluster an object is in, in a question across
// clusters. Where an object has a member of that name, ".cluster" is the
// member.
const ClusterKey = "cluster"

// AcrossClusters is s with ClusterKey naming the cluster: the schema a
// question across clusters is read with. The keys it parses may be used
// with s, once their cluster terms are decided.
func (s *Schema) AcrossClusters() *Schema {
	out := *s
	out.across = true
	return &out
}

// IsCluster reports whether the key is ClusterKey of a question across
// clusters.
func (k Key) IsCluster() bool { return k.kind == clusterKey }

// InCluster is f as asked of one cluster: each term on ClusterKey is
// decided against the cluster's name, a clause holding a true one is
// dropped (it holds for every object there), and the false ones are left
// out of theirs. match is false when a clause is left with no term: no
// object of the cluster can match, so it need not be asked.
func (f Filter) InCluster(name string) (local Filter, match bool) {
	cv := []Value{Text(name)}
	for _, cl := range f {
		var rest Clause
		holds := false
		for _, t := range cl {
			switch {
			case !t.Key.IsCluster():
				rest = append(rest, t)
			case t.test(cv):
				holds = true
			}
		}
		switch {
		case holds:
		case len(rest) == 0:
			return nil, false
		default:
			local = append(local, rest)
		}
	}
	return local, true
}

// Local are the sort keys but ClusterKey: what each cluster sorts by.
func Local(keys []SortKey) []SortKey {
	var out []SortKey
	for _, k := range keys {
		if !k.Key.IsCluster() {
			out = append(out, k)
		}
	}
	return out
}

// LocalKeys are the keys but ClusterKey: what each cluster groups by.
func LocalKeys(keys []Key) []Key {
	var out []Key
	for _, k := range keys {
		if !k.IsCluster() {
			out = append(out, k)
		}
	}
	return out
}

// SortText is the sort parameter that reads as keys: the keys as
// written, "-" before the descending ones.
func SortText(keys []SortKey) string {
	var b []byte
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if k.Desc {
			b = append(b, '-')
		}
		b = append(b, k.Key.name...)
	}
	return string(b)
}

// ClusterValues are the values of keys for an object of the named
// cluster whose values of the other keys, in order, are local: the
// cluster's name where a key is ClusterKey.
func ClusterValues[K SortKey | Key](keys []K, name string, local []Value) []Value {
	out := make([]Value, len(keys))
	j := 0
	for i, k := range keys {
		var key Key
		switch k := any(k).(type) {
		case SortKey:
			key = k.Key
		case Key:
			key = k
		}
		if key.IsCluster() {
			out[i] = Text(name)
			continue
		}
		if j < len(local) {
			out[i] = local[j]
		}
		j++
	}
	return out
}
