package main

// Tests of several servers on one PostgreSQL database (DESIGN.md "Many
// servers"): the built binary, started more than once on one database.
// Skipped without PETSTORE_TEST_POSTGRES, and with -short.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two servers take creates from 8 goroutines each while a reader walks the
// list page by page through a third. Ids commit in id order, so a walk that
// lists a pet lists every pet with a smaller id: none commits late behind
// the reader's cursor. After the load, one more walk lists every 201 once.
func TestTwoServersCreateWhileAThirdPagesEveryPetOnce(t *testing.T) {
	t.Parallel()
	db := testPostgresURL(t)
	key := mustCreateKeyCLI(t, viaBinary, "--db", db, "--plan", "enterprise", "--name", "replicas",
		"--rpm", "100000000", "--rpd", "1000000000")
	dir := t.TempDir()
	writers := []*runningPetstore{startPetstore(t, dir, "serve", "--db", db), startPetstore(t, dir, "serve", "--db", db)}
	reader := startPetstore(t, dir, "serve", "--db", db)
	for _, s := range append(slices.Clone(writers), reader) {
		s.keysSent = append(s.keysSent, key)
	}

	const perServer = 8
	var (
		mu      sync.Mutex
		acked   = map[int64]apiPet{}
		stopped atomic.Bool
		wg      sync.WaitGroup
	)
	for w, s := range writers {
		client := faultClient(perServer)
		defer client.CloseIdleConnections()
		for g := range perServer {
			wg.Go(func() {
				for n := 0; !stopped.Load(); n++ {
					p := apiPet{Name: fmt.Sprintf("server %d worker %d pet %d", w, g, n), CategoryID: int64(n + 1)}
					res := faultDo(client, "POST", s.url+"/v1/pets", key, faultNewPetBody(p))
					if res.err != nil || res.status != http.StatusCreated {
						t.Errorf("POST to server %d: %d %v %s", w, res.status, res.err, res.body)
						return
					}
					got, err := faultDecodePet(res.body)
					if err != nil || !faultSamePet(got, p) {
						t.Errorf("POST %s answered %s (%v)", p.Name, res.body, err)
						return
					}
					mu.Lock()
					acked[got.ID] = got
					mu.Unlock()
				}
			})
		}
	}
	var walks [][]int64
	readerClient := faultClient(1)
	defer readerClient.CloseIdleConnections()
	for start := time.Now(); time.Since(start) < 3*time.Second && !t.Failed(); {
		walks = append(walks, replicaWalk(t, readerClient, reader.url, key, 7))
	}
	stopped.Store(true)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	all := slices.Sorted(maps.Keys(acked))
	final := replicaWalk(t, readerClient, reader.url, key, 100)
	if !slices.Equal(final, all) {
		t.Errorf("after the load the list holds %d pets, want the %d acknowledged, each once, ascending", len(final), len(all))
	}
	for i, walk := range walks {
		if len(walk) == 0 {
			continue
		}
		// Every acknowledged pet up to the last one this walk listed.
		want := all[:sort64(all, walk[len(walk)-1])]
		if !slices.Equal(walk, want) {
			missing := slices.DeleteFunc(slices.Clone(want), func(id int64) bool { _, found := slices.BinarySearch(walk, id); return found })
			t.Errorf("walk %d of %d listed %d pets up to id %d, want %d: missing %v", i+1, len(walks), len(walk), walk[len(walk)-1], len(want), first(missing, 10))
		}
	}
	if len(all) < 100 || len(walks) < 3 {
		t.Errorf("%d pets created and %d walks made: too few to test anything", len(all), len(walks))
	}
	t.Logf("%d pets created through two servers, %d walks through a third", len(all), len(walks))
}

// replicaWalk lists every pet, following rel="next" from a first page of
// limit, and returns the ids in the order listed.
func replicaWalk(t *testing.T, client *http.Client, base, key string, limit int) []int64 {
	t.Helper()
	var ids []int64
	for _, p := range faultListAllFrom(t, client, base, key, "/v1/pets?limit="+strconv.Itoa(limit)) {
		ids = append(ids, p.ID)
	}
	return ids
}

// sort64 is the number of ids in sorted up to and including id.
func sort64(sorted []int64, id int64) int {
	i, found := slices.BinarySearch(sorted, id)
	if found {
		i++
	}
	return i
}

func first[T any](s []T, n int) []T { return s[:min(n, len(s))] }
