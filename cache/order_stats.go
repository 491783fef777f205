package cache

// OrderStats describe one resource's ordered indexes, for metrics: a
// harness reads them to know when the cache has settled after its sync
// (the column warmer's first pass done and the standing indexes built).
type OrderStats struct {
	Resource string
	// Asked and Standing count the built indexes kept: those questions
	// asked for, and the standing ones (order_standing.go).
	Asked, Standing int
	// StandingPending counts the standing indexes the column warmer has
	// yet to build; the warmer builds them right after its first pass
	// over the resource's objects, so 0 also says that pass is done
	// (always 0 for a resource with none, and with LazyColumns).
	StandingPending int
}

// OrderStats describe every resource's ordered indexes, in
// configuration order. Safe for concurrent use.
func (c *Cache) OrderStats() []OrderStats {
	out := make([]OrderStats, len(c.resources))
	for i, r := range c.resources {
		out[i] = r.orders.stats(r.res.Name, len(c.standing(r)))
	}
	return out
}

// stats counts the built indexes; standing is how many standing indexes
// the resource should have.
func (os *orders) stats(resource string, standing int) OrderStats {
	st := OrderStats{Resource: resource}
	os.mu.Lock() // guards each index's standing
	defer os.mu.Unlock()
	for _, ix := range os.live() {
		select {
		case <-ix.ready:
		default:
			continue // being built
		}
		if ix.standing {
			st.Standing++
		} else {
			st.Asked++
		}
	}
	st.StandingPending = max(0, standing-st.Standing)
	return st
}
