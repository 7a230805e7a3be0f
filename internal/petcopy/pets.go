package petcopy

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"petstore/internal/appendjson"
	"petstore/internal/batch"
	"petstore/internal/domain"
)

// Store is what the pets' copy reads and writes: the pets, and the
// records that replay a create.
type Store interface {
	domain.PetStore
	domain.IdempotencyStore
	Shared() bool
}

// Cache holds a copy of every pet in memory and answers pet reads from it
// as encoded JSON; SQLite stays the source of truth. Pets are only ever
// added, with ascending ids, so the copy is an append-only array: a write
// appends to it before the write is acknowledged, and a read never sees a
// page older than a 201 it could have seen.
//
// The copy is filled in the background after start-up, so a large database
// does not delay readiness; until it is complete, reads go to SQLite. Only
// one server may write to a database file.
//
// On a database that other servers write too (PostgreSQL: shared), the copy
// is a complete prefix of the table instead: every pet up to its last id,
// as ids commit in id order. It is tailed after each local create, on each
// notice of another server's (LISTEN/NOTIFY) and by a poll; a read it cannot
// answer in full from the prefix (an id past its end, a page that reaches
// its end) goes to the database, so a server never answers older than a
// 201 that another server sent.
//
// Memory: about 13 bytes a pet plus its name (a million pets: ~25 MiB).
type Cache struct {
	store   Store
	shared  bool
	timeout time.Duration // bounds the database work of one create (--db-timeout)

	tailing chan struct{}                   // held by the one tail at a time, so that none appends a pet twice
	writeMu sync.Mutex                      // orders "insert, then append": the copy stays in id order
	commits batch.Batcher[domain.PetInsert] // concurrent creates share commits
	loaded  atomic.Bool                     // the copy is complete: reads use it

	mu       sync.RWMutex
	chunks   []*petChunk
	names    [][]byte // names[k] holds the names of chunks[k], back to back
	count    int
	byStatus [len(statusNames)][]int32 // positions of the pets with each status, ascending
}

// statusNames are PetStatus values; a pet's status is stored as its index
// here plus one, zero meaning none.
var statusNames = [...]string{"available", "pending", "sold"}

func statusIndex(s string) int {
	for i, name := range statusNames {
		if s == name {
			return i + 1
		}
	}
	return 0
}

// petChunk stores chunkSize pets column by column, so a million pets are a
// few hundred allocations instead of a million. Two columns are kept narrow
// while they can be: ids, which are dense unless pets were deleted by hand,
// are firstID+i until one is not; categories are int32 until one does not
// fit. A pet then costs 9 bytes here plus its name.
const chunkSize = 4096

type petChunk struct {
	firstID int64
	ids     *[chunkSize]int64 // nil while the chunk's ids are dense
	wide    *[chunkSize]int64 // the categories, once one is beyond int32; nil before
	// No other pointers: the garbage collector scans only the two above.
	category [chunkSize]int32
	nameEnd  [chunkSize]uint32 // the pet's name is names[nameEnd[i-1]:nameEnd[i]]
	status   [chunkSize]uint8
}

func (ch *petChunk) id(i int) int64 {
	if ch.ids == nil {
		return ch.firstID + int64(i)
	}
	return ch.ids[i]
}

func (ch *petChunk) categoryAt(i int) int64 {
	if ch.wide == nil {
		return int64(ch.category[i])
	}
	return ch.wide[i]
}

// set stores the id and category of the pet at i, the chunk's next one,
// widening a column when the value needs it.
func (ch *petChunk) set(i int, id, category int64) {
	if i == 0 {
		ch.firstID = id
	}
	if ch.ids == nil && id != ch.firstID+int64(i) {
		ch.ids = new([chunkSize]int64)
		for j := range i {
			ch.ids[j] = ch.firstID + int64(j)
		}
	}
	if ch.ids != nil {
		ch.ids[i] = id
	}
	if ch.wide == nil && category != int64(int32(category)) {
		ch.wide = new([chunkSize]int64)
		for j := range i {
			ch.wide[j] = int64(ch.category[j])
		}
	}
	if ch.wide != nil {
		ch.wide[i] = category
	} else {
		ch.category[i] = int32(category)
	}
}

// New makes an empty copy of the pets of store: Load or LoadInBackground
// fills it, and reads go to store until it is complete.
func New(store Store, timeout time.Duration) *Cache {
	c := &Cache{store: store, shared: store.Shared(), timeout: timeout, tailing: make(chan struct{}, 1)}
	c.commits = batch.Batcher[domain.PetInsert]{Name: "group commit", Max: MaxBatch, MaxQueued: MaxQueuedCreates, Run: c.write}
	return c
}

// Store is the store, for the records that replay a create under an Idempotency-Key.
func (c *Cache) Store() Store { return c.store }

// Listing is one encoded page of listPets; Next is the id its Link
// rel="next" continues after, or 0 on the last page.
type Listing struct {
	Body []byte
	Next int64
}

// loadRetryEvery is the pause before a failed load is tried again.
const loadRetryEvery = time.Second

// loadBatch is how many pets Load reads per query. A batch takes a
// couple of milliseconds; between batches requests get the CPU, so that
// on one core they are not held up while a large database loads.
const loadBatch = 1_000

// Load copies every stored pet into memory, then serves reads from the copy.
func (c *Cache) Load(ctx context.Context) error {
	if err := c.loadRest(ctx, runtime.Gosched); err != nil {
		return err
	}
	// The last pets, with creates held back, so that none is missed.
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.loadRest(ctx, func() {}); err != nil {
		return err
	}
	c.loaded.Store(true)
	return nil
}

// loadRest copies the pets after the last one held, loadBatch at a time,
// and calls between after each full batch. Until the copy is complete no
// reader takes c.mu, so holding it for a batch delays nobody.
func (c *Cache) loadRest(ctx context.Context, between func()) error {
	for {
		c.mu.Lock()
		n, err := c.store.ScanPets(ctx, c.lastID(), loadBatch, func(id int64, name []byte, categoryID int64, status []byte) {
			c.add(id, name, categoryID, statusIndex(string(status)))
		})
		c.mu.Unlock()
		if err != nil || n < loadBatch {
			return err
		}
		between()
	}
}

// LoadInBackground runs Load, again after a pause while it fails (the
// database away: reads go to it meanwhile), and logs how it went.
func (c *Cache) LoadInBackground(ctx context.Context, logger *slog.Logger) {
	for failures := 0; ; failures++ {
		err := c.Load(ctx)
		if err == nil {
			break
		}
		if failures == 0 && ctx.Err() == nil {
			logger.Warn("copy pets into memory; reads go to the database until it is done, tried again every "+loadRetryEvery.String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(loadRetryEvery):
		}
	}
	n, _ := c.Size()
	logger.Info("pets copied into memory", "pets", n)
}

// add appends a pet whose id is above every id held; c.mu is held.
func (c *Cache) add(id int64, name []byte, categoryID int64, st int) {
	pos := c.count
	if pos%chunkSize == 0 {
		// Size the names for what the last chunk needed, so that growing
		// them rarely copies.
		var names []byte
		if len(c.names) > 0 {
			last := len(c.names[len(c.names)-1])
			names = make([]byte, 0, last+last/8)
		}
		c.chunks = append(c.chunks, &petChunk{})
		c.names = append(c.names, names)
	}
	k, i := pos/chunkSize, pos%chunkSize
	ch := c.chunks[k]
	ch.set(i, id, categoryID)
	c.names[k] = append(c.names[k], name...)
	ch.nameEnd[i] = uint32(len(c.names[k]))
	ch.status[i] = uint8(st)
	if st > 0 {
		c.byStatus[st-1] = append(c.byStatus[st-1], int32(pos))
	}
	c.count++
}

// Size is how many pets the store holds; ok is false until the copy is complete.
func (c *Cache) Size() (n int, ok bool) {
	if !c.loaded.Load() {
		return 0, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.count, true
}

func (c *Cache) idAt(pos int) int64 { return c.chunks[pos/chunkSize].id(pos % chunkSize) }

// firstAbove returns the position of the first pet whose id is above id,
// or c.count when there is none. Pets are never deleted, so ids are
// usually dense and the position is found at once from the first id;
// else, or when the guess is wrong, by binary search.
func (c *Cache) firstAbove(id int64) int {
	if c.count == 0 || id >= c.lastID() {
		return c.count
	}
	if id < c.idAt(0) {
		return 0
	}
	guess := int(id - c.idAt(0) + 1)
	if guess < c.count && c.idAt(guess) > id && c.idAt(guess-1) <= id {
		return guess
	}
	return sort.Search(c.count, func(pos int) bool { return c.idAt(pos) > id })
}

func (c *Cache) lastID() int64 {
	if c.count == 0 {
		return 0
	}
	return c.idAt(c.count - 1)
}

// appendPetAt encodes the pet at pos as AppendPet does.
func (c *Cache) appendPetAt(b []byte, pos int) []byte {
	ch, i := c.chunks[pos/chunkSize], pos%chunkSize
	start := uint32(0)
	if i > 0 {
		start = ch.nameEnd[i-1]
	}
	b = append(b, `{"id":`...)
	b = appendInt(b, ch.id(i))
	b = append(b, `,"name":`...)
	b = appendjson.String(b, c.names[pos/chunkSize][start:ch.nameEnd[i]])
	b = append(b, `,"categoryId":`...)
	b = appendInt(b, ch.categoryAt(i))
	if st := ch.status[i]; st > 0 {
		b = append(b, `,"status":"`...)
		b = append(b, statusNames[st-1]...)
		b = append(b, '"')
	}
	return append(b, '}')
}

// List encodes a page of listPets: up to limit pets whose id is above after,
// of status (any when ""), from the copy when it can answer in full, else
// from the database.
func (c *Cache) List(ctx context.Context, status string, after int64, limit int) (Listing, error) {
	if c.loaded.Load() {
		if p, ok := c.listCopy(status, after, limit); ok {
			return p, nil
		}
	}
	return c.listStored(ctx, status, after, limit)
}

// listCopy is List from the copy; ok is false when the copy cannot answer
// in full: on a shared database, a page that reaches the end of the prefix,
// as pets past it may follow in the database.
func (c *Cache) listCopy(status string, after int64, limit int) (p Listing, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b := make([]byte, 0, 64*limit+4)
	b = append(b, '[')
	if st := statusIndex(status); st > 0 {
		positions := c.byStatus[st-1]
		from := sort.Search(len(positions), func(i int) bool { return c.idAt(int(positions[i])) > after })
		if c.shared && len(positions)-from <= limit {
			return Listing{}, false
		}
		to := min(from+limit, len(positions))
		for j, pos := range positions[from:to] {
			if j > 0 {
				b = append(b, ',')
			}
			b = c.appendPetAt(b, int(pos))
		}
		if to < len(positions) {
			p.Next = c.idAt(int(positions[to-1]))
		}
	} else {
		from := c.firstAbove(after)
		if c.shared && c.count-from <= limit {
			return Listing{}, false
		}
		to := min(from+limit, c.count)
		for pos := from; pos < to; pos++ {
			if pos > from {
				b = append(b, ',')
			}
			b = c.appendPetAt(b, pos)
		}
		if to < c.count {
			p.Next = c.idAt(to - 1)
		}
	}
	p.Body = append(b, ']', '\n')
	return p, true
}

// listStored is List from the database, while the copy is being made.
func (c *Cache) listStored(ctx context.Context, status string, after int64, limit int) (Listing, error) {
	pets, err := c.store.ListPets(ctx, status, after, limit+1)
	if err != nil {
		return Listing{}, err
	}
	var p Listing
	if len(pets) > limit {
		pets = pets[:limit]
		p.Next = pets[limit-1].ID
	}
	p.Body = appendPets(make([]byte, 0, 64*len(pets)+4), pets)
	return p, nil
}

// Get encodes the pet with id, a line of JSON, from the copy when it can
// answer, else from the database.
func (c *Cache) Get(ctx context.Context, id int64) ([]byte, error) {
	if c.loaded.Load() {
		if body, ok, err := c.getCopy(id); ok {
			return body, err
		}
	}
	return c.getStored(ctx, id)
}

// getCopy is Get from the copy; ok is false past the end of a shared
// database's prefix, where another server may have stored the pet just now.
func (c *Cache) getCopy(id int64) (body []byte, ok bool, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.shared && id > c.lastID() {
		return nil, false, nil
	}
	pos := c.firstAbove(id - 1)
	if pos == c.count || c.idAt(pos) != id {
		return nil, true, domain.NotFound("no pet has id %d", id)
	}
	return append(c.appendPetAt(make([]byte, 0, 96), pos), '\n'), true, nil
}

// getStored is Get from the database.
func (c *Cache) getStored(ctx context.Context, id int64) ([]byte, error) {
	p, err := c.store.GetPet(ctx, id)
	if err != nil {
		return nil, err
	}
	return append(AppendPet(nil, &p), '\n'), nil
}

// Follow tails the copy each time added says other servers may have
// stored pets, until ctx ends. A failed tail costs only speed: reads past
// the copy go to the database.
func (c *Cache) Follow(ctx context.Context, added <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-added:
			c.Tail(ctx)
		}
	}
}

// Tail appends the pets stored since the last one the prefix holds, by this
// server or another. It reads them before it takes c.mu, so that readers
// wait only for the appends.
func (c *Cache) Tail(ctx context.Context) error {
	if !c.loaded.Load() {
		return nil
	}
	if err := c.holdTail(ctx); err != nil {
		return err
	}
	defer c.releaseTail()
	return c.tailLocked(ctx)
}

// holdTail makes this caller the one tail at a time, or gives up when ctx
// ends first.
func (c *Cache) holdTail(ctx context.Context) error {
	select {
	case c.tailing <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Cache) releaseTail() { <-c.tailing }

// tailLocked is Tail while holding the tail.
func (c *Cache) tailLocked(ctx context.Context) error {
	for {
		c.mu.RLock()
		after := c.lastID()
		c.mu.RUnlock()
		pets, err := c.store.ListPets(ctx, "", after, loadBatch)
		if err != nil || len(pets) == 0 {
			return err
		}
		c.mu.Lock()
		for i := range pets {
			p := &pets[i]
			c.add(p.ID, []byte(p.Name), p.CategoryID, statusIndex(p.Status))
		}
		c.mu.Unlock()
		if len(pets) < loadBatch {
			return nil
		}
	}
}

// Deadline is the context of one create's database work, however many
// calls it makes: it ends after the timeout, and not when the client hangs
// up, as the create may share a commit with others.
func (c *Cache) Deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
}

// Create stores p (with rec, when the request had an Idempotency-Key) and
// puts it in the copy before returning, so the 201 that follows is never
// ahead of a list. Concurrent creates share commits (group commit). ctx is
// the create's deadline.
func (c *Cache) Create(ctx context.Context, p domain.Pet, rec *domain.IdempotencyRecord) (domain.Pet, error) {
	insert, err := c.commits.Do(ctx, domain.PetInsert{Pet: p, Idem: rec})
	switch {
	case errors.Is(err, batch.ErrQueueFull):
		return domain.Pet{}, domain.Unavailable(domain.DBPoolExhausted, err)
	case errors.Is(err, batch.ErrNotRun):
		return domain.Pet{}, domain.Unavailable(domain.DBTimeout, err)
	case err != nil:
		return domain.Pet{}, err
	}
	return insert.Pet, insert.Err
}

// MaxBatch bounds one commit, so that no create waits behind too many;
// MaxQueuedCreates bounds the creates waiting for a commit, so that while
// the database stalls the next ones are answered 503 at once rather than
// at the deadline.
const (
	MaxBatch         = 256
	MaxQueuedCreates = 4 * MaxBatch
)

// write stores a batch of creates in one transaction and adds them to the copy.
func (c *Cache) write(ctx context.Context, batch []domain.PetInsert) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if err := c.store.CreatePets(ctx, batch); err != nil {
		return err
	}
	if c.shared {
		c.appendStored(ctx, batch)
		return nil
	}
	if c.loaded.Load() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.addBatch(batch)
	}
	return nil
}

// addBatch appends the pets of a stored batch, but those its idempotency
// records turned away; c.mu is held.
func (c *Cache) addBatch(batch []domain.PetInsert) {
	for i := range batch {
		if batch[i].Err == nil {
			p := &batch[i].Pet
			c.add(p.ID, []byte(p.Name), p.CategoryID, statusIndex(p.Status))
		}
	}
}

// appendStored adds a batch just stored in a shared database to the copy.
// When the batch's ids follow the last one held, no other pet can come
// between (ids commit in id order) and it is appended as it is; else
// other servers' pets may come before it: the copy is tailed, which takes
// them all in order.
func (c *Cache) appendStored(ctx context.Context, batch []domain.PetInsert) {
	if !c.loaded.Load() {
		return
	}
	if c.holdTail(ctx) != nil {
		return // the deadline passed: reads past the prefix go to the database
	}
	defer c.releaseTail()
	c.mu.Lock()
	last := c.lastID()
	follows := last+1 == batch[0].Pet.ID
	if follows {
		c.addBatch(batch)
	}
	c.mu.Unlock()
	if !follows && last < batch[len(batch)-1].Pet.ID {
		c.tailLocked(ctx)
	}
}
