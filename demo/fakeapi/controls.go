package fakeapi

// TestControls are what only tests do to the server: provoke what a real
// API server does to its clients, and read the objects back as an oracle.
// Tests obtain them through Controls; the kubeindex binary never calls it,
// so none of this is linked into it.
type TestControls interface {
	// DropWatches closes every open watch stream, as a dropped connection
	// would. Clients re-watch from their last resourceVersion.
	DropWatches()
	// CompactHistory forgets every retained event, as etcd compaction
	// does: a watch or a continued list from any resourceVersion older
	// than the current one then gets 410 Gone, and the client must relist.
	CompactHistory()
	// SetUnavailable starts (true) or ends (false) an outage: while it
	// lasts every request is answered 503, and starting it closes every
	// open watch, as a real outage drops connections.
	SetUnavailable(down bool)
	// Objects returns the current objects of resource, with apiVersion and
	// kind, ordered by namespace then name: the oracle to compare a
	// client's view with. The caller owns the slices. It returns nil for
	// an unknown resource.
	Objects(resource string) [][]byte
}

// Controls returns the test controls of s.
func Controls(s *Server) TestControls { return controls{s} }

type controls struct{ s *Server }

func (f controls) DropWatches() {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.stopAllWatchers()
}

func (f controls) CompactHistory() { f.s.ForgetHistory() }

func (f controls) SetUnavailable(down bool) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.s.unavailable = down
	if down {
		f.s.stopAllWatchers()
	}
}

func (f controls) Objects(resource string) [][]byte {
	var out [][]byte
	if _, err := resourceByName(resource); err != nil {
		return nil
	}
	f.s.Each(resource, func(_ uint64, obj []byte) { out = append(out, append([]byte(nil), obj...)) })
	if out == nil {
		out = [][]byte{}
	}
	return out
}
