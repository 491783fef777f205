//go:build race

package cache

// raceEnabled: the race detector is on, under which a sync.Pool drops a
// quarter of what is put in it, by design.
const raceEnabled = true
