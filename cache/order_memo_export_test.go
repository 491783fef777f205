package cache

// MarkPassesEvery makes the passes over ordered indexes mark every n-th
// match, so that small tests walk from marks, until the test ends.
func MarkPassesEvery(t interface{ Cleanup(func()) }, n int) {
	old := markEvery
	markEvery = n
	t.Cleanup(func() { markEvery = old })
}
