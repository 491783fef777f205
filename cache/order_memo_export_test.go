package cache

// MarkPassesEvery makes the passes over ordered indexes mark every n-th
// match, so that small tests walk from marks, until the test ends.
func MarkPassesEvery(t interface{ Cleanup(func()) }, n int) {
	old := markEvery
	markEvery = n
	t.Cleanup(func() { markEvery = old })
}

// ReadRunsOf makes backward readings of ordered indexes hold at most n
// entries of a run, so that small tests read long runs forwards from
// their start, until the test ends.
func ReadRunsOf(t interface{ Cleanup(func()) }, n int) {
	old := reverseRun
	reverseRun = n
	t.Cleanup(func() { reverseRun = old })
}
