//go:build !race

package cache

// raceEnabled: the race detector is on (race_on_test.go).
const raceEnabled = false
