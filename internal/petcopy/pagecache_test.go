package petcopy

import "testing"

func TestPageCacheStaysWithinItsSize(t *testing.T) {
	for _, tt := range []struct {
		name string
		body int
	}{{"large pages", 100 << 10}, {"pages of one pet, where the entries cost more than the bodies", 60}} {
		t.Run(tt.name, func(t *testing.T) {
			var c Pages
			body := make([]byte, tt.body)
			link := []string{nextLink(Query{Limit: 1}, 1)}
			pages := int64(5 * pageCacheBytes / tt.body)
			for after := range pages {
				c.put(Query{Limit: 1, After: after}, &Page{Body: body, Link: link})
			}
			held := int64(0)
			c.pages.Range(func(_, p any) bool {
				held += p.(*Page).size()
				return true
			})
			if held > pageCacheBytes || held != c.bytes.Load() {
				t.Errorf("the cache holds %d bytes and counts %d, for a bound of %d", held, c.bytes.Load(), pageCacheBytes)
			}
			if _, ok := c.get(Query{Limit: 1, After: pages - 1}); !ok {
				t.Error("the page put last is not kept")
			}
			if _, ok := c.get(Query{Limit: 1, After: 0}); ok {
				t.Error("the page put first is still kept after five times the bound")
			}
		})
	}
}
