package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/petcopy"
	"petstore/internal/testkit"
)

// benchServer is a test server whose key no limit will stop.
func benchServer(b *testing.B, pets int) (*testServer, string) {
	return benchServerWith(b, pets, testOptions{})
}

// benchServerWith is benchServer with opts.
func benchServerWith(b *testing.B, pets int, opts testOptions) (*testServer, string) {
	opts.petsFromDatabase = true // until seeded
	s := newTestServerWith(&testing.T{}, opts)
	b.Cleanup(func() { s.store.Close() })
	testkit.SeedPets(b, s.sqlite.Writer(), pets)
	if err := s.pets.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s, s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1 << 50, PerDay: 1 << 50})
}

// discardWriter is a ResponseWriter that keeps only the status, so that a
// benchmark measures the handler and not a recorder.
type discardWriter struct {
	header http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(status int)      { w.status = status }

func BenchmarkOperations(b *testing.B) {
	s, key := benchServer(b, 10_000)
	free := s.mustCreateKey("free")
	for range 60 {
		s.do("GET", "/v1/pets", free, "")
	}
	for _, bc := range []struct {
		name, method, target, key, body string
		status                          int
	}{
		{"list", "GET", "/v1/pets?limit=20", key, "", 200},
		{"list_status", "GET", "/v1/pets?limit=20&status=available", key, "", 200},
		{"get", "GET", "/v1/pets/5000", key, "", 200},
		{"create", "POST", "/v1/pets", key, `{"name":"Rex","categoryId":1,"status":"available"}`, 201},
		{"unauthorized", "GET", "/v1/pets", "psk_live_0000000000000000000000000000000000000000", "", 401},
		{"rate_limited", "GET", "/v1/pets", free, "", 429},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			req := httptest.NewRequest(bc.method, bc.target, nil)
			req.Header.Set("Authorization", "Bearer "+bc.key)
			req.Header.Set("Content-Type", "application/json")
			body := strings.NewReader(bc.body)
			w := &discardWriter{header: http.Header{}}
			addrs := make([]string, 1<<16)
			for i := range addrs {
				// Each 401 from its own address, so the address limit stays out of it.
				addrs[i] = fmt.Sprintf("10.0.%d.%d:1", byte(i>>8), byte(i))
			}
			i := 0
			for b.Loop() {
				i++
				req.RemoteAddr = addrs[i%len(addrs)]
				body.Reset(bc.body)
				req.Body = io.NopCloser(body)
				clear(w.header)
				w.status = 0
				s.handler.ServeHTTP(w, req)
				if w.status != bc.status {
					b.Fatalf("status %d, want %d", w.status, bc.status)
				}
			}
		})
	}
}

// BenchmarkCreateConcurrent is createPet from 32 clients at once, as in the
// load benchmark: concurrent creates share commits.
func BenchmarkCreateConcurrent(b *testing.B) {
	s, key := benchServer(b, 1000)
	b.ReportAllocs()
	b.SetParallelism(16) // 32 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		body := strings.NewReader("")
		w := &discardWriter{header: http.Header{}}
		req := httptest.NewRequest("POST", "/v1/pets", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for pb.Next() {
			body.Reset(`{"name":"Rex","categoryId":1,"status":"available"}`)
			req.Body = io.NopCloser(body)
			clear(w.header)
			s.handler.ServeHTTP(w, req)
			if w.status != 201 {
				b.Fatalf("status %d", w.status)
			}
		}
	})
}

// BenchmarkPage compares a page of 20 from the in-memory copy with the same
// page from SQLite, as served while the copy is still being made.
func BenchmarkPage(b *testing.B) {
	s, _ := benchServer(b, 100_000)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		pets *petcopy.Cache
	}{{"memory", s.pets}, {"sqlite", petcopy.New(s.store, DefaultDBTimeout)}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.pets.List(ctx, "available", 40_000, 20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
