package main

import (
	"context"
	"sync"
	"sync/atomic"
)

// pageCache keeps the encoded answers to list queries whose page is followed
// by more pets. Pets are only ever added, each with an id above all others,
// so such a page can never change: it needs no invalidation, and a create
// can never make it stale. The last page of a listing, which a create does
// change, is never kept.
//
// The cache holds about pageCacheBytes at most; when a new page
// would pass that, it is emptied and refills with the pages asked for since.
type pageCache struct {
	pages sync.Map // listQuery → *cachedPage
	bytes atomic.Int64
}

// cachedPage is a page's body and its Link header value, ready to send.
type cachedPage struct {
	body []byte
	link []string
}

const pageCacheBytes = 4 << 20

// answer returns the page q asks for, kept or read from pets, and keeps it
// when more pets follow it.
func (c *pageCache) answer(ctx context.Context, pets *petCache, q listQuery) (*cachedPage, error) {
	if p, ok := c.get(q); ok {
		return p, nil
	}
	page, err := pets.list(ctx, q.status, q.after, q.limit)
	if err != nil {
		return nil, err
	}
	p := &cachedPage{body: page.body}
	if page.next != 0 {
		p.link = []string{nextLink(q, page.next)}
		c.put(q, p)
	}
	return p, nil
}

func (c *pageCache) get(q listQuery) (*cachedPage, bool) {
	p, ok := c.pages.Load(q)
	if !ok {
		return nil, false
	}
	return p.(*cachedPage), true
}

// put keeps p for q. The caller promises that more pets follow the page.
func (c *pageCache) put(q listQuery, p *cachedPage) {
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
func (p *cachedPage) size() int64 {
	n := cap(p.body) + 200
	for _, link := range p.link {
		n += len(link)
	}
	return int64(n)
}
