package cache

// route says how ev looks through the filter. An object entering the
// selection (a label added, a pod scheduled onto the watched node) is
// ADDED, one leaving it is DELETED, so that a client applying the events
// holds exactly the matching objects. fc caches facts of ev's objects
// (0: the current one, 1: the previous one) across subscribers.
func (f *filter) route(ev *event, fc *[2]*facts) (EventType, bool) {
	in := func(i int, o *Object) bool {
		if f.selector == nil && f.fn == nil && f.fields == nil {
			return f.inNamespace(o.namespace) && f.inShard(o)
		}
		if fc[i] == nil {
			fc[i] = &facts{}
		}
		return f.matches(o, fc[i])
	}
	switch ev.typ {
	case Added:
		return Added, in(0, ev.obj)
	case Deleted:
		return Deleted, in(1, ev.old) // the client holds it if its last state matched
	}
	was, is := in(1, ev.old), in(0, ev.obj)
	switch {
	case was && is:
		return Modified, true
	case is:
		return Added, true
	case was:
		return Deleted, true
	}
	return "", false
}
