package fakeapi

import "time"

// Options configure a fake API server. The zero value is usable: every
// field documents its default.
type Options struct {
	// Seed makes the uids and names the server assigns deterministic.
	Seed int64
	// GitVersion is what /version reports (default "v1.37.0-fake"); its
	// major and minor numbers are reported too.
	GitVersion string
	// HistorySize is how many events are retained for watches that resume
	// from a resourceVersion (default 1000). Older versions get 410 Gone.
	HistorySize int
	// BookmarkInterval is how often a watch that allows bookmarks gets one
	// (default 5s).
	BookmarkInterval time.Duration
	// WatchBuffer is how many events a watch may lag behind before it is
	// closed (default 256); the client then re-watches or relists.
	WatchBuffer int
	// Now is the clock for the creationTimestamp of created objects
	// (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.GitVersion == "" {
		o.GitVersion = "v1.37.0-fake"
	}
	if o.HistorySize <= 0 {
		o.HistorySize = 1000
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = 5 * time.Second
	}
	if o.WatchBuffer <= 0 {
		o.WatchBuffer = 256
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
