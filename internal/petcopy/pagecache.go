package petcopy

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"petstore/internal/domain"
)

// Pages keeps the encoded answers to list queries whose page is followed
// by more pets. Pets are only ever added, each with an id above all others,
// so such a page can never change: it needs no invalidation, and a create
// can never make it stale. The last page of a listing, which a create does
// change, is never kept.
//
// The cache holds about pageCacheBytes at most; when a new page
// would pass that, it is emptied and refills with the pages asked for since.
type Pages struct {
	pages sync.Map // Query → *Page
	bytes atomic.Int64
}

// Page is a page's body and its Link header value, ready to send.
type Page struct {
	Body []byte
	Link []string
}

const pageCacheBytes = 4 << 20

// Answer returns the page q asks for, kept or read from pets, and keeps it
// when more pets follow it.
func (c *Pages) Answer(ctx context.Context, pets *Cache, q Query) (*Page, error) {
	if p, ok := c.get(q); ok {
		return p, nil
	}
	page, err := pets.List(ctx, q.Status, q.After, q.Limit)
	if err != nil {
		return nil, err
	}
	p := &Page{Body: page.Body}
	if page.Next != 0 {
		p.Link = []string{nextLink(q, page.Next)}
		c.put(q, p)
	}
	return p, nil
}

func (c *Pages) get(q Query) (*Page, bool) {
	p, ok := c.pages.Load(q)
	if !ok {
		return nil, false
	}
	return p.(*Page), true
}

// put keeps p for q. The caller promises that more pets follow the page.
func (c *Pages) put(q Query, p *Page) {
	size := p.size()
	if c.bytes.Add(size) > pageCacheBytes {
		c.pages.Clear()
		c.bytes.Store(size)
	}
	if _, loaded := c.pages.LoadOrStore(q, p); loaded {
		c.bytes.Add(-size)
	}
}

// size is the memory a kept page holds: its body's array, its Link, and
// about what the map's entry and key cost.
func (p *Page) size() int64 {
	n := cap(p.Body) + 200
	for _, link := range p.Link {
		n += len(link)
	}
	return int64(n)
}

// Query is a validated query string of listPets (the root's
// parseListQuery reads it).
type Query struct {
	Limit  int
	Status string
	After  int64 // from the cursor: list ids above this one
}

// nextLink is the RFC 8288 Link to the page after the one that ended at id,
// keeping the request's other parameters.
func nextLink(q Query, last int64) string {
	b := make([]byte, 0, 96)
	b = append(b, "</v1/pets?limit="...)
	b = strconv.AppendInt(b, int64(q.Limit), 10)
	if q.Status != "" {
		b = append(b, "&status="...)
		b = append(b, q.Status...)
	}
	b = append(b, "&cursor="...)
	b = domain.AppendCursor(b, last)
	b = append(b, `>; rel="next"`...)
	return string(b)
}
