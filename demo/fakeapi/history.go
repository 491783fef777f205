package fakeapi

import "fmt"

// record appends ev to the bounded history and hands it to the open
// watches. s.mu must be held.
func (s *Server) record(ev event) {
	s.history = append(s.history, ev)
	if over := len(s.history) - s.opts.HistorySize; over > 0 {
		s.historyFrom = s.history[over-1].obj.rv
		s.history = append([]event(nil), s.history[over:]...)
	}
	s.broadcast(ev)
}

// errExpired is the 410 answer to a resourceVersion older than the history.
type errExpired struct{ asked, oldest uint64 }

func (e errExpired) Error() string {
	return fmt.Sprintf("too old resource version: %d (%d)", e.asked, e.oldest)
}

// since returns the retained events after rv, oldest first, or errExpired
// when events after rv have been forgotten. s.mu must be held.
func (s *Server) since(rv uint64) ([]event, error) {
	if rv < s.historyFrom {
		return nil, errExpired{rv, s.historyFrom + 1}
	}
	if rv >= s.rv {
		return nil, nil
	}
	// History RVs are consecutive, ending at s.rv.
	first := len(s.history) - int(s.rv-rv)
	return s.history[first:], nil
}

// objectsAt returns the objects of r as they were at resourceVersion rv,
// by undoing the retained events after it. s.mu must be held; the map
// returned is the live one when rv is current, so it must only be read
// while s.mu is held.
func (s *Server) objectsAt(r *resource, rv uint64) (map[key]*object, error) {
	later, err := s.since(rv)
	if err != nil {
		return nil, err
	}
	cur := s.objects[r.plural]
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
