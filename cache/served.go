package cache

// APIResources returns the resources the cache holds, in configuration
// order, without counting their objects (Resources does): cheap enough for
// every discovery request. Safe for concurrent use.
func (c *Cache) APIResources() []Resource {
	out := make([]Resource, len(c.resources))
	for i, r := range c.resources {
		out[i] = r.res
	}
	return out
}
