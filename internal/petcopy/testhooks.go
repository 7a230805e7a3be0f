package petcopy

// The hooks below are for the tests of a running server, which must see
// what its copy of the pets holds or whether a commit runs. Nothing else
// calls them.

// IDs is the ids the copy holds, in order.
func (c *Cache) IDs() []int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ids := make([]int64, c.count)
	for pos := range ids {
		ids[pos] = c.idAt(pos)
	}
	return ids
}

// Committing tells whether a batch of creates is being committed.
func (c *Cache) Committing() bool { return c.commits.Busy() }
