package cache

import "github.com/kubeindex/kubeindex/ipowner"

// Test-only entry points, compiled only with the tests.

// LookupIP is LookupAddress without a moment or a port.
func (c *Cache) LookupIP(ip string) (IPLookup, error) {
	return c.LookupAddress(ipowner.Query{IP: ip})
}

// HoldEvents makes the event handler of the resource's shards call hold
// before handing each event on (nil: no more), as a handler that lags
// behind its reflector.
func (c *Cache) HoldEvents(resource string, hold func()) {
	r, err := c.resource(resource)
	if err != nil {
		panic(err)
	}
	for _, sh := range r.shards {
		if hold == nil {
			sh.hold.Store(nil)
		} else {
			sh.hold.Store(&hold)
		}
	}
}

// ListRV is the highest resourceVersion the resource's reflectors have
// taken in, read without moving the stream's position.
func (c *Cache) ListRV(resource string) uint64 {
	r, err := c.resource(resource)
	if err != nil {
		panic(err)
	}
	return r.listRV()
}
