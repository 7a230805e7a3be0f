package main

import "testing"

func TestPageCacheStaysWithinItsSize(t *testing.T) {
	for _, tt := range []struct {
		name string
		body int
	}{{"large pages", 100 << 10}, {"pages of one pet, where the entries cost more than the bodies", 60}} {
		t.Run(tt.name, func(t *testing.T) {
			var c pageCache
			body := make([]byte, tt.body)
			link := []string{nextLink(listQuery{limit: 1}, 1)}
			pages := int64(5 * pageCacheBytes / tt.body)
			for after := range pages {
				c.put(listQuery{limit: 1, after: after}, &cachedPage{body: body, link: link})
			}
			held := int64(0)
			c.pages.Range(func(_, p any) bool {
				held += p.(*cachedPage).size()
				return true
			})
			if held > pageCacheBytes || held != c.bytes.Load() {
				t.Errorf("the cache holds %d bytes and counts %d, for a bound of %d", held, c.bytes.Load(), pageCacheBytes)
			}
			if _, ok := c.get(listQuery{limit: 1, after: pages - 1}); !ok {
				t.Error("the page put last is not kept")
			}
			if _, ok := c.get(listQuery{limit: 1, after: 0}); ok {
				t.Error("the page put first is still kept after five times the bound")
			}
		})
	}
}
