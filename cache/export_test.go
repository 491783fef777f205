package cache

import (
	"strings"

	"github.com/kubeindex/kubeindex/ipowner"
)

// Test-only entry points, compiled only with the tests.

// LookupIP is LookupAddress without a moment or a port.
func (c *Cache) LookupIP(ip string) (IPLookup, error) {
	return c.LookupAddress(ipowner.Query{IP: ip})
}

// OrderedIndexes are the sorts of a resource's ordered indexes.
func (c *Cache) OrderedIndexes(resource string) []string {
	var out []string
	for _, ix := range c.byName[resource].orders.live() {
		_, sort, _ := strings.Cut(ix.id, "\x00")
		out = append(out, sort)
	}
	return out
}

// AnswerNarrowFromSelection makes every question whose selection narrows
// (a namespace, an index value) be answered from its selection, until
// the test ends.
func AnswerNarrowFromSelection(t interface{ Cleanup(func()) }) {
	old := narrowShare
	narrowShare = 0
	t.Cleanup(func() { narrowShare = old })
}
