package cache

import "github.com/kubeindex/kubeindex/ipowner"

// Test-only entry points, compiled only with the tests.

// LookupIP is LookupAddress without a moment or a port.
func (c *Cache) LookupIP(ip string) (IPLookup, error) {
	return c.LookupAddress(ipowner.Query{IP: ip})
}
