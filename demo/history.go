package demo

import "fmt"

// record appends ev to the bounded history and hands it to the open
// watches. c.mu must be held.
func (c *Cluster) record(ev event) {
	c.history = append(c.history, ev)
	if over := len(c.history) - c.opts.HistorySize; over > 0 {
		c.historyFrom = c.history[over-1].obj.rv
		c.history = append([]event(nil), c.history[over:]...)
	}
	c.broadcast(ev)
}

// CompactHistory forgets every retained event, as etcd compaction does: a
// watch or a continued list from any resourceVersion older than the current
// one then gets 410 Gone, and the client must relist.
func (c *Cluster) CompactHistory() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.history = nil
	c.historyFrom = c.rv
}

// errExpired is the 410 answer to a resourceVersion older than the history.
type errExpired struct{ asked, oldest uint64 }

func (e errExpired) Error() string {
	return fmt.Sprintf("too old resource version: %d (%d)", e.asked, e.oldest)
}

// since returns the retained events after rv, oldest first, or errExpired
// when events after rv have been forgotten. c.mu must be held.
func (c *Cluster) since(rv uint64) ([]event, error) {
	if rv < c.historyFrom {
		return nil, errExpired{rv, c.historyFrom + 1}
	}
	if rv >= c.rv {
		return nil, nil
	}
	// History RVs are consecutive, ending at c.rv.
	first := len(c.history) - int(c.rv-rv)
	return c.history[first:], nil
}

// objectsAt returns the objects of r as they were at resourceVersion rv,
// by undoing the retained events after it. c.mu must be held; the map
// returned is the live one when rv is current, so it must only be read
// while c.mu is held.
func (c *Cluster) objectsAt(r *resource, rv uint64) (map[key]*object, error) {
	later, err := c.since(rv)
	if err != nil {
		return nil, err
	}
	cur := c.objects[r.plural]
	if len(later) == 0 {
		return cur, nil
	}
	at := make(map[key]*object, len(cur))
	for k, o := range cur {
		at[k] = o
	}
	for i := len(later) - 1; i >= 0; i-- {
		ev := later[i]
		if ev.obj.res != r {
			continue
		}
		if ev.old == nil {
			delete(at, ev.obj.key())
		} else {
			at[ev.old.key()] = ev.old
		}
	}
	return at, nil
}
