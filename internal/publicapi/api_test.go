package publicapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"petstore/internal/servertest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/testkit"
)

// These tests check the HTTP contract of docs/api.md, the README and openapi.yaml through the
// real handler on a real SQLite file. Helpers here start with "api" so they
// do not collide with the helpers of other test files.

// apiListBody is the whole first page of up to 100 pets, as sent.
func apiListBody(s *servertest.Server, key string) string {
	s.T.Helper()
	w := s.Do("GET", "/v1/pets?limit=100", key, "")
	if w.Code != http.StatusOK {
		s.T.Fatalf("list pets: HTTP status = %d; body: %s", w.Code, w.Body)
	}
	return w.Body.String()
}

// apiSend sends a request built by hand, for what s.Do cannot express (an
// empty header value, a body of unknown length, a header given twice).
func apiSend(s *servertest.Server, req *http.Request) *httptest.ResponseRecorder {
	s.T.Helper()
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w
}

// apiEachReadMode runs test on a fresh server holding pets of the given
// statuses, once for each way the server answers pet reads: from its
// in-memory copy, from SQLite while that copy is still being made after a
// start, from a copy made after the pets were stored, and from PostgreSQL.
func apiEachReadMode(t *testing.T, statuses []string, test func(t *testing.T, s *servertest.Server, key string, pets []testkit.Pet)) {
	t.Helper()
	modes := []struct {
		name          string
		fromDatabase  bool
		loadAfterSeed bool
		postgres      bool
	}{
		{"pets in memory", false, false, false},
		{"pets read from the database", true, false, false},
		{"pets copied into memory after start", true, true, false},
		{"pets on postgres, read from the database", true, false, true},
		{"pets on postgres, a prefix copied into memory", true, true, true},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			s := servertest.Start(t, servertest.Options{PetsFromDatabase: m.fromDatabase, Postgres: m.postgres})
			key := s.MustCreateKey("business")
			pets := s.AddPets(key, statuses...)
			if m.loadAfterSeed {
				if err := s.LoadPets(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			test(t, s, key, pets)
		})
	}
}

// apiPadBody pads a valid pet object with spaces to exactly n bytes.
func apiPadBody(n int) string {
	obj := `{"name":"Rex","categoryId":1}`
	return obj + strings.Repeat(" ", n-len(obj))
}

// ---------------------------------------------------------------- listPets

func TestListPetsLimit(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, make([]string, 101), func(t *testing.T, s *servertest.Server, key string, pets []testkit.Pet) {
		tests := []struct {
			name     string
			target   string
			wantLen  int
			wantNext bool
		}{
			{"no limit gives 20", "/v1/pets", 20, true},
			{"limit 1", "/v1/pets?limit=1", 1, true},
			{"limit 20", "/v1/pets?limit=20", 20, true},
			{"limit 100", "/v1/pets?limit=100", 100, true},
			{"other parameters are ignored", "/v1/pets?limit=3&color=brown", 3, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := s.Do("GET", tt.target, key, "")
				got := testkit.ReadPets(t, w)
				if len(got) != tt.wantLen {
					t.Fatalf("got %d pets, want %d", len(got), tt.wantLen)
				}
				if want := testkit.PetIDs(pets[:tt.wantLen]); !slices.Equal(testkit.PetIDs(got), want) {
					t.Errorf("ids = %v, want the first ones in ascending order %v", testkit.PetIDs(got), want)
				}
				if _, ok := testkit.NextLink(t, w); ok != tt.wantNext {
					t.Errorf("Link rel=next present = %v, want %v", ok, tt.wantNext)
				}
			})
		}
	})
}

// apiBadQuery is a query string that listPets must refuse.
type apiBadQuery struct{ name, query string }

// apiWantQueriesRefused sends GET /v1/pets with each query after prefix,
// and wants each refused with a 400 invalid_request naming field.
func apiWantQueriesRefused(t *testing.T, s *servertest.Server, key, prefix, field string, queries []apiBadQuery) {
	t.Helper()
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			servertest.WantError(t, s.Do("GET", "/v1/pets?"+prefix+q.query, key, ""), http.StatusBadRequest, "invalid_request", field)
		})
	}
}

func TestListPetsRejectsABadLimit(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		s.AddPets(key, "available")

		apiWantQueriesRefused(t, s, key, "", "limit", []apiBadQuery{
			{"limit 0", "limit=0"},
			{"limit 101", "limit=101"},
			{"limit abc", "limit=abc"},
			{"limit 1.5", "limit=1.5"},
			{"limit -1", "limit=-1"},
			{"limit empty", "limit="},
			{"limit +5", "limit=%2B5"},
			{"limit +5 unencoded (a space then 5)", "limit=+5"},
			{"limit 1e1", "limit=1e1"},
			{"limit with a space", "limit=%205"},
			{"limit beyond int64", "limit=99999999999999999999"},
			{"limit given twice", "limit=5&limit=6"},
			{"limit with a broken percent escape", "limit=%zz"},
		})
	})
}

func TestListPetsStatusFilter(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, []string{"available", "pending", "sold", "", "sold", "available", "", "pending", "available"}, func(t *testing.T, s *servertest.Server, key string, pets []testkit.Pet) {
		for _, status := range []string{"available", "pending", "sold"} {
			t.Run("only "+status, func(t *testing.T) {
				var want []int64
				for _, p := range pets {
					if p.Status != nil && *p.Status == status {
						want = append(want, p.ID)
					}
				}
				got := testkit.ReadPets(t, s.Do("GET", "/v1/pets?status="+status, key, ""))
				for _, p := range got {
					if p.Status == nil || *p.Status != status {
						t.Errorf("pet %d has status %v, want %s", p.ID, p.Status, status)
					}
				}
				if !slices.Equal(testkit.PetIDs(got), want) {
					t.Errorf("ids = %v, want %v", testkit.PetIDs(got), want)
				}
			})
		}
		t.Run("no filter lists every pet in ascending id order", func(t *testing.T) {
			got := testkit.ReadPets(t, s.Do("GET", "/v1/pets", key, ""))
			if !slices.Equal(testkit.PetIDs(got), testkit.PetIDs(pets)) {
				t.Errorf("ids = %v, want %v", testkit.PetIDs(got), testkit.PetIDs(pets))
			}
			if !slices.IsSorted(testkit.PetIDs(got)) {
				t.Errorf("ids %v are not ascending", testkit.PetIDs(got))
			}
		})
	})
}

func TestListPetsRejectsABadStatus(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		apiWantQueriesRefused(t, s, key, "", "status", []apiBadQuery{
			{"status outside the enum", "status=lost"},
			{"status in capitals", "status=Available"},
			{"status empty", "status="},
			{"status given twice", "status=available&status=sold"},
			{"status with a broken percent escape", "status=avail%zzable"},
		})
	})
}

func TestListPetsPagination(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, []string{"available", "pending", "available", "", "sold", "available", "available", "pending", "available", "", "available", "sold", "available"}, func(t *testing.T, s *servertest.Server, key string, pets []testkit.Pet) {
		tests := []struct {
			name      string
			start     string
			limit     int
			status    string
			wantPages int
		}{
			{"every pet, 2 per page", "/v1/pets?limit=2", 2, "", 7},
			{"every pet, a page size that divides the count", "/v1/pets?limit=13", 13, "", 1},
			{"every pet, 5 per page", "/v1/pets?limit=5", 5, "", 3},
			{"available pets, 2 per page", "/v1/pets?limit=2&status=available", 2, "available", 4},
			{"available pets, page size divides the count", "/v1/pets?status=available&limit=7", 7, "available", 1},
			{"sold pets, 1 per page", "/v1/pets?limit=1&status=sold", 1, "sold", 2},
			{"pending pets, no limit given", "/v1/pets?status=pending", 20, "pending", 1},
			{"one page holds them all", "/v1/pets?limit=100", 100, "", 1},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var want []int64
				for _, p := range pets {
					if tt.status == "" || (p.Status != nil && *p.Status == tt.status) {
						want = append(want, p.ID)
					}
				}
				var seen []int64
				target, pages := tt.start, 0
				for {
					pages++
					if pages > 50 {
						t.Fatalf("more than 50 pages: the Link rel=next never ends")
					}
					w := s.Do("GET", target, key, "")
					page := testkit.ReadPets(t, w)
					if len(page) > tt.limit {
						t.Errorf("page %d has %d pets, more than the limit %d", pages, len(page), tt.limit)
					}
					seen = append(seen, testkit.PetIDs(page)...)
					next, ok := testkit.NextLink(t, w)
					if !ok {
						break
					}
					if len(page) != tt.limit {
						t.Errorf("page %d has %d pets and a rel=next; a page with more after it is full (%d)", pages, len(page), tt.limit)
					}
					u, err := url.Parse(next)
					if err != nil || u.IsAbs() || u.Path != "/v1/pets" {
						t.Fatalf("Link rel=next %q is not a relative reference to /v1/pets", next)
					}
					q := u.Query()
					if got := q.Get("limit"); got != strconv.Itoa(tt.limit) {
						t.Errorf("Link rel=next %q has limit=%q, want %d kept", next, got, tt.limit)
					}
					if got := q.Get("status"); got != tt.status {
						t.Errorf("Link rel=next %q has status=%q, want %q kept", next, got, tt.status)
					}
					if q.Get("cursor") == "" {
						t.Errorf("Link rel=next %q has no cursor", next)
					}
					target = next
				}
				if !slices.Equal(seen, want) {
					t.Errorf("walking the pages saw ids %v, want each of %v once, ascending", seen, want)
				}
				if pages != tt.wantPages {
					t.Errorf("walked %d pages, want %d", pages, tt.wantPages)
				}
			})
		}
	})
}

func TestListPetsDefaultPageLinksToTheNext(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, make([]string, 25), func(t *testing.T, s *servertest.Server, key string, pets []testkit.Pet) {
		w := s.Do("GET", "/v1/pets", key, "")
		first := testkit.ReadPets(t, w)
		next, ok := testkit.NextLink(t, w)
		if !ok {
			t.Fatalf("first page of 25 pets has no Link rel=next; Link: %q", w.Header().Values("Link"))
		}
		if !strings.HasPrefix(next, "/v1/pets?limit=20&cursor=") {
			t.Errorf("Link rel=next = %q, want /v1/pets?limit=20&cursor=...", next)
		}
		w = s.Do("GET", next, key, "")
		second := testkit.ReadPets(t, w)
		if _, ok := testkit.NextLink(t, w); ok {
			t.Errorf("last page has a Link rel=next")
		}
		if got := append(testkit.PetIDs(first), testkit.PetIDs(second)...); !slices.Equal(got, testkit.PetIDs(pets)) {
			t.Errorf("two pages gave ids %v, want %v", got, testkit.PetIDs(pets))
		}
	})
}

func TestListPetsRejectsAMalformedCursor(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, []string{"", "", ""}, func(t *testing.T, s *servertest.Server, key string, _ []testkit.Pet) {
		w := s.Do("GET", "/v1/pets?limit=1", key, "")
		next, ok := testkit.NextLink(t, w)
		if !ok {
			t.Fatal("no Link rel=next on a page of 1 of 3 pets")
		}
		u, _ := url.Parse(next)
		cursor := u.Query().Get("cursor")

		apiWantQueriesRefused(t, s, key, "limit=1&", "cursor", []apiBadQuery{
			{"cursor is made-up text", "cursor=hello-world"},
			{"cursor is not base64", "cursor=%21%21%21%21"},
			{"cursor with spaces", "cursor=not+a+cursor"},
			{"cursor empty", "cursor="},
			{"cursor given twice", "cursor=" + cursor + "&cursor=" + cursor},
		})
	})
}

func TestListPetsEmptyListIsAnEmptyArray(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, nil, func(t *testing.T, s *servertest.Server, key string, _ []testkit.Pet) {
		for _, target := range []string{"/v1/pets", "/v1/pets?status=sold", "/v1/pets?limit=1"} {
			t.Run(target, func(t *testing.T) {
				w := s.Do("GET", target, key, "")
				if got := testkit.ReadPets(t, w); len(got) != 0 {
					t.Errorf("got %d pets, want none", len(got))
				}
				if got := strings.TrimSpace(w.Body.String()); got != "[]" {
					t.Errorf("body = %q, want []", got)
				}
				if _, ok := testkit.NextLink(t, w); ok {
					t.Errorf("an empty list has a Link rel=next")
				}
			})
		}
	})
}

// --------------------------------------------------------------- createPet

func TestCreatePet(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		str := func(s string) *string { return &s }

		tests := []struct {
			name   string
			body   string
			header []string
			want   testkit.Pet // ID is ignored
		}{
			{"name and category, no status", `{"name":"Rex","categoryId":1}`, nil, testkit.Pet{Name: "Rex", CategoryID: 1}},
			{"status available", `{"name":"Rex","categoryId":2,"status":"available"}`, nil, testkit.Pet{Name: "Rex", CategoryID: 2, Status: str("available")}},
			{"status pending", `{"name":"Mia","categoryId":3,"status":"pending"}`, nil, testkit.Pet{Name: "Mia", CategoryID: 3, Status: str("pending")}},
			{"status sold", `{"name":"Bo","categoryId":4,"status":"sold"}`, nil, testkit.Pet{Name: "Bo", CategoryID: 4, Status: str("sold")}},
			{"fields in another order, with spaces", "{ \"status\" : \"sold\" ,\n \"categoryId\" : 5 , \"name\" : \"Kit\" }", nil, testkit.Pet{Name: "Kit", CategoryID: 5, Status: str("sold")}},
			{"name with accents and emoji", `{"name":"Zoë 🐶","categoryId":1}`, nil, testkit.Pet{Name: "Zoë 🐶", CategoryID: 1}},
			{"name with quotes and a backslash", `{"name":"Sir \"Rex\" \\ II","categoryId":1}`, nil, testkit.Pet{Name: `Sir "Rex" \ II`, CategoryID: 1}},
			{"name of 200 characters", `{"name":"` + strings.Repeat("a", 200) + `","categoryId":1}`, nil, testkit.Pet{Name: strings.Repeat("a", 200), CategoryID: 1}},
			{"name of 200 emoji (800 bytes)", `{"name":"` + strings.Repeat("🐶", 200) + `","categoryId":1}`, nil, testkit.Pet{Name: strings.Repeat("🐶", 200), CategoryID: 1}},
			{"name of 200 accented letters", `{"name":"` + strings.Repeat("é", 200) + `","categoryId":1}`, nil, testkit.Pet{Name: strings.Repeat("é", 200), CategoryID: 1}},
			{"largest categoryId", `{"name":"Rex","categoryId":9223372036854775807}`, nil, testkit.Pet{Name: "Rex", CategoryID: 9223372036854775807}},
			{"Content-Type with a charset", `{"name":"Rex","categoryId":1}`, []string{"Content-Type", "application/json; charset=utf-8"}, testkit.Pet{Name: "Rex", CategoryID: 1}},
			{"Content-Type in capitals", `{"name":"Rex","categoryId":1}`, []string{"Content-Type", "Application/JSON"}, testkit.Pet{Name: "Rex", CategoryID: 1}},
			{"body of exactly 64 KiB", apiPadBody(64 << 10), nil, testkit.Pet{Name: "Rex", CategoryID: 1}},
		}
		var lastID int64
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := s.Do("POST", "/v1/pets", key, tt.body, tt.header...)
				if w.Code != http.StatusCreated {
					t.Fatalf("HTTP status = %d, want 201; body: %s", w.Code, w.Body)
				}
				testkit.WantJSON(t, w)
				got := testkit.ReadPet(t, w.Body.Bytes())
				if got.ID <= lastID {
					t.Errorf("id = %d, want one above the last id %d", got.ID, lastID)
				}
				lastID = got.ID
				if got.Name != tt.want.Name || got.CategoryID != tt.want.CategoryID {
					t.Errorf("pet = %q/%d, want %q/%d", got.Name, got.CategoryID, tt.want.Name, tt.want.CategoryID)
				}
				switch {
				case tt.want.Status == nil && got.Status != nil:
					t.Errorf("status = %q, want none (absent): no default is given", *got.Status)
				case tt.want.Status != nil && (got.Status == nil || *got.Status != *tt.want.Status):
					t.Errorf("status = %v, want %q", got.Status, *tt.want.Status)
				}
				if tt.want.Status == nil && bytes.Contains(w.Body.Bytes(), []byte(`"status"`)) {
					t.Errorf("body has a status field, want it absent: %s", w.Body)
				}
				if loc, want := w.Header().Get("Location"), "/v1/pets/"+strconv.FormatInt(got.ID, 10); loc != want {
					t.Errorf("Location = %q, want %q", loc, want)
				}
				// The pet is stored: reading it back gives the same pet.
				r := s.Do("GET", "/v1/pets/"+strconv.FormatInt(got.ID, 10), key, "")
				if r.Code != http.StatusOK {
					t.Fatalf("read back: HTTP status = %d; body: %s", r.Code, r.Body)
				}
				if back := testkit.ReadPet(t, r.Body.Bytes()); back.ID != got.ID || back.Name != got.Name ||
					back.CategoryID != got.CategoryID || (back.Status == nil) != (got.Status == nil) {
					t.Errorf("read back %+v, created %+v", back, got)
				}
			})
		}
	})
}

func TestCreatePetRejectsABadBody(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		s.AddPets(key, "available")
		valid := `{"name":"Rex","categoryId":1}`

		tests := []struct {
			name       string
			body       string
			header     []string
			wantStatus int
			wantCode   string
			mention    string // a word the message must hold
		}{
			{"name missing", `{"categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name null", `{"name":null,"categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name empty", `{"name":"","categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name only spaces", `{"name":"   ","categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name only tabs and newlines", `{"name":" \t\n ","categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name a number", `{"name":5,"categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name true", `{"name":true,"categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name an object", `{"name":{"first":"Rex"},"categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name an array", `{"name":["Rex"],"categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name of 201 characters", `{"name":"` + strings.Repeat("a", 201) + `","categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"name of 201 emoji", `{"name":"` + strings.Repeat("🐶", 201) + `","categoryId":1}`, nil, 400, "invalid_request", "name"},
			{"categoryId missing", `{"name":"Rex"}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId null", `{"name":"Rex","categoryId":null}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId 0", `{"name":"Rex","categoryId":0}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId -1", `{"name":"Rex","categoryId":-1}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId 1.5", `{"name":"Rex","categoryId":1.5}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId a string", `{"name":"Rex","categoryId":"1"}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId true", `{"name":"Rex","categoryId":true}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId beyond int64", `{"name":"Rex","categoryId":9223372036854775808}`, nil, 400, "invalid_request", "categoryId"},
			{"categoryId far beyond int64", `{"name":"Rex","categoryId":1e30}`, nil, 400, "invalid_request", "categoryId"},
			{"status outside the enum", `{"name":"Rex","categoryId":1,"status":"lost"}`, nil, 400, "invalid_request", "status"},
			{"status in capitals", `{"name":"Rex","categoryId":1,"status":"Available"}`, nil, 400, "invalid_request", "status"},
			{"status empty", `{"name":"Rex","categoryId":1,"status":""}`, nil, 400, "invalid_request", "status"},
			{"status null", `{"name":"Rex","categoryId":1,"status":null}`, nil, 400, "invalid_request", "status"},
			{"status a number", `{"name":"Rex","categoryId":1,"status":1}`, nil, 400, "invalid_request", "status"},
			{"unknown field", `{"name":"Rex","categoryId":1,"color":"brown"}`, nil, 400, "invalid_request", "color"},
			{"id sent by the client", `{"id":7,"name":"Rex","categoryId":1}`, nil, 400, "invalid_request", "id"},
			{"field name in other case", `{"Name":"Rex","categoryId":1}`, nil, 400, "invalid_request", "Name"},
			{"trailing object after the object", valid + `{}`, nil, 400, "invalid_json", ""},
			{"trailing text after the object", valid + ` x`, nil, 400, "invalid_json", ""},
			{"two objects", valid + "\n" + valid, nil, 400, "invalid_json", ""},
			{"array body", `[` + valid + `]`, nil, 400, "invalid_json", ""},
			{"empty array body", `[]`, nil, 400, "invalid_json", ""},
			{"string body", `"Rex"`, nil, 400, "invalid_json", ""},
			{"number body", `42`, nil, 400, "invalid_json", ""},
			{"null body", `null`, nil, 400, "invalid_json", ""},
			{"empty body", ``, []string{"Content-Type", "application/json"}, 400, "invalid_json", ""},
			{"only spaces as body", `   `, nil, 400, "invalid_json", ""},
			{"invalid JSON: cut short", `{"name":"Rex",`, nil, 400, "invalid_json", ""},
			{"invalid JSON: bare words", `{name:Rex}`, nil, 400, "invalid_json", ""},
			{"invalid JSON: single quotes", `{'name':'Rex','categoryId':1}`, nil, 400, "invalid_json", ""},
			{"no Content-Type", valid, []string{"Content-Type", ""}, 415, "unsupported_media_type", "Content-Type"},
			{"Content-Type text/plain", valid, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type", "Content-Type"},
			{"Content-Type form", valid, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "unsupported_media_type", "Content-Type"},
			{"Content-Type malformed", valid, []string{"Content-Type", "application/json; charset"}, 415, "unsupported_media_type", "Content-Type"},
			{"body of 64 KiB and one byte", apiPadBody(64<<10 + 1), nil, 413, "payload_too_large", ""},
			{"name of 70,000 characters", `{"name":"` + strings.Repeat("a", 70000) + `","categoryId":1}`, nil, 413, "payload_too_large", ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := apiListBody(s, key)
				w := s.Do("POST", "/v1/pets", key, tt.body, tt.header...)
				var mentions []string
				if tt.mention != "" {
					mentions = append(mentions, tt.mention)
				}
				servertest.WantError(t, w, tt.wantStatus, tt.wantCode, mentions...)
				if loc := w.Header().Get("Location"); loc != "" {
					t.Errorf("a rejected request has Location %q", loc)
				}
				if after := apiListBody(s, key); after != before {
					t.Errorf("the list changed after a rejected request:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	})
}

func TestCreatePetBodyOfUnannouncedLength(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		tests := []struct {
			name       string
			body       string
			wantStatus int
		}{
			{"small body", `{"name":"Rex","categoryId":1}`, 201},
			{"exactly 64 KiB", apiPadBody(64 << 10), 201},
			{"64 KiB and one byte", apiPadBody(64<<10 + 1), 413},
			{"a name longer than 64 KiB", `{"name":"` + strings.Repeat("a", 70000) + `","categoryId":1}`, 413},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := testkit.PetCount(s.T, s.Do, key)
				// A MultiReader hides the length, as a chunked upload does.
				req := httptest.NewRequest("POST", "/v1/pets", io.MultiReader(strings.NewReader(tt.body)))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				if req.ContentLength != -1 {
					t.Fatalf("test setup: ContentLength = %d, want unknown", req.ContentLength)
				}
				w := apiSend(s, req)
				wantCount := before
				if tt.wantStatus == 201 {
					if w.Code != 201 {
						t.Fatalf("HTTP status = %d, want 201; body: %s", w.Code, w.Body)
					}
					wantCount++
				} else {
					servertest.WantError(t, w, tt.wantStatus, "payload_too_large")
				}
				if got := testkit.PetCount(s.T, s.Do, key); got != wantCount {
					t.Errorf("pets = %d, want %d", got, wantCount)
				}
			})
		}
	})
}

// ------------------------------------------------------------------ getPet

func TestGetPet(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, []string{"pending", ""}, func(t *testing.T, s *servertest.Server, key string, pets []testkit.Pet) {
		sunsetUnix := time.Date(2030, time.December, 5, 0, 0, 0, 0, time.UTC).Unix()

		tests := []struct {
			name       string
			petID      string
			wantStatus int
			wantCode   string
			want       *testkit.Pet
		}{
			{"pet with a status", strconv.FormatInt(pets[0].ID, 10), 200, "", &pets[0]},
			{"pet without a status", strconv.FormatInt(pets[1].ID, 10), 200, "", &pets[1]},
			{"unknown id", "999", 404, "not_found", nil},
			{"largest id, not taken", "9223372036854775807", 404, "not_found", nil},
			{"id 0", "0", 400, "invalid_request", nil},
			{"id -1", "-1", 400, "invalid_request", nil},
			{"id abc", "abc", 400, "invalid_request", nil},
			{"id 1.5", "1.5", 400, "invalid_request", nil},
			{"id +1", "%2B1", 400, "invalid_request", nil},
			{"id beyond int64", "9223372036854775808", 400, "invalid_request", nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := s.Do("GET", "/v1/pets/"+tt.petID, key, "")
				if tt.want != nil {
					if w.Code != http.StatusOK {
						t.Fatalf("HTTP status = %d, want 200; body: %s", w.Code, w.Body)
					}
					testkit.WantJSON(t, w)
					got := testkit.ReadPet(t, w.Body.Bytes())
					if got.ID != tt.want.ID || got.Name != tt.want.Name || got.CategoryID != tt.want.CategoryID ||
						(got.Status == nil) != (tt.want.Status == nil) || (got.Status != nil && *got.Status != *tt.want.Status) {
						t.Errorf("pet = %+v, want %+v", got, *tt.want)
					}
				} else {
					var mentions []string
					if tt.wantStatus == 400 {
						mentions = []string{"petId"}
					}
					servertest.WantError(t, w, tt.wantStatus, tt.wantCode, mentions...)
				}

				// Every routed response of the deprecated operation says so.
				dep := w.Header().Get("Deprecation")
				if n, err := strconv.ParseInt(strings.TrimPrefix(dep, "@"), 10, 64); !strings.HasPrefix(dep, "@") || err != nil || n <= 0 || n > sunsetUnix {
					t.Errorf("Deprecation = %q, want @<unix seconds> not after the sunset", dep)
				}
				if got, want := w.Header().Get("Sunset"), "Thu, 05 Dec 2030 00:00:00 GMT"; got != want {
					t.Errorf("Sunset = %q, want %q", got, want)
				}
				if got, want := w.Header().Values("Link"), []string{`</v1/pets>; rel="successor-version"`}; !slices.Equal(got, want) {
					t.Errorf("Link = %q, want %q", got, want)
				}
			})
		}
	})
}

// ---------------------------------------------------------- authentication

func TestAuthentication(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		ctx := context.Background()
		key := s.MustCreateKey("business")

		revoked := s.MustCreateKey("free")
		hash := domain.HashKey(revoked)
		rk, ok, err := s.Store().KeyByHash(ctx, hash[:])
		if err != nil || !ok {
			t.Fatalf("find the key to revoke: ok=%v err=%v", ok, err)
		}
		if _, err := s.Store().RevokeKey(ctx, rk.ID, servertest.Actor); err != nil {
			t.Fatal(err)
		}
		if err := s.Keys().Refresh(ctx); err != nil {
			t.Fatal(err)
		}

		staging := servertest.Start(t, servertest.Options{Env: "staging"})
		stagingKey := staging.MustCreateKey("free")
		// A staging key stored in the production database is still refused.
		terms := s.KeyTerms("free")
		terms.Env = "staging"
		_, stagingHere := s.MustCreate(terms)
		if err := s.Keys().Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		wrongChecksum := key[:len(key)-1] + "A"
		if strings.HasSuffix(key, "A") {
			wrongChecksum = key[:len(key)-1] + "B"
		}

		const realm = `Bearer realm="petstore"`
		const invalidToken = `Bearer realm="petstore", error="invalid_token"`
		tests := []struct {
			name          string
			authorization string // "" sends no Authorization header
			wantStatus    int
			wantChallenge string
		}{
			{"no Authorization header", "", 401, realm},
			{"Basic scheme", "Basic dXNlcjpwYXNz", 401, realm},
			{"Basic scheme carrying a real key", "Basic " + key, 401, realm},
			{"Bearer with nothing after it", "Bearer", 401, realm},
			{"Bearer followed by spaces only", "Bearer    ", 401, realm},
			{"unknown key", "Bearer " + domain.NewKeyToken("production"), 401, invalidToken},
			{"malformed key", "Bearer hello", 401, invalidToken},
			{"key with a wrong checksum", "Bearer " + wrongChecksum, 401, invalidToken},
			{"key cut short", "Bearer " + key[:len(key)-1], 401, invalidToken},
			{"key with extra text", "Bearer " + key + "x", 401, invalidToken},
			{"revoked key", "Bearer " + revoked, 401, invalidToken},
			{"staging key on the production server", "Bearer " + stagingKey, 401, invalidToken},
			{"staging key stored in the production database", "Bearer " + stagingHere, 401, invalidToken},
			{"valid key", "Bearer " + key, 200, ""},
			{"scheme in lower case", "bearer " + key, 200, ""},
			{"scheme in capitals", "BEARER " + key, 200, ""},
			{"several spaces after the scheme", "Bearer    " + key, 200, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := s.Do("GET", "/v1/pets", "", "", "Authorization", tt.authorization)
				if tt.wantStatus == 200 {
					if w.Code != http.StatusOK {
						t.Fatalf("HTTP status = %d, want 200; body: %s", w.Code, w.Body)
					}
					if c := w.Header().Get("WWW-Authenticate"); c != "" {
						t.Errorf("a 200 has WWW-Authenticate %q", c)
					}
					return
				}
				servertest.WantError(t, w, http.StatusUnauthorized, "unauthorized")
				if got := w.Header().Values("WWW-Authenticate"); !slices.Equal(got, []string{tt.wantChallenge}) {
					t.Errorf("WWW-Authenticate = %q, want %q", got, tt.wantChallenge)
				}
			})
		}

		t.Run("production key on the staging server", func(t *testing.T) {
			w := staging.Do("GET", "/v1/pets", key, "")
			servertest.WantError(t, w, http.StatusUnauthorized, "unauthorized")
			if got := w.Header().Get("WWW-Authenticate"); got != invalidToken {
				t.Errorf("WWW-Authenticate = %q, want %q", got, invalidToken)
			}
		})
		t.Run("staging key on the staging server", func(t *testing.T) {
			if w := staging.Do("GET", "/v1/pets", stagingKey, ""); w.Code != http.StatusOK {
				t.Errorf("HTTP status = %d, want 200; body: %s", w.Code, w.Body)
			}
		})
	})
}

func TestAuthenticationComesBeforeRouting(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		tests := []struct {
			name       string
			method     string
			target     string
			withKey    bool
			wantStatus int
			wantCode   string
		}{
			{"unknown path under /v1, no key", "GET", "/v1/nothing", false, 401, "unauthorized"},
			{"unknown path under /v1, with key", "GET", "/v1/nothing", true, 404, "not_found"},
			{"unknown nested path under /v1, with key", "GET", "/v1/pets/1/photos", true, 404, "not_found"},
			{"wrong method, no key", "DELETE", "/v1/pets", false, 401, "unauthorized"},
			{"wrong method, with key", "DELETE", "/v1/pets", true, 405, "method_not_allowed"},
			{"bad pet id, no key", "GET", "/v1/pets/abc", false, 401, "unauthorized"},
			{"bad limit, no key", "GET", "/v1/pets?limit=0", false, 401, "unauthorized"},
			{"bad body, no key", "POST", "/v1/pets", false, 401, "unauthorized"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				k, body := "", ""
				if tt.withKey {
					k = key
				}
				if tt.method == "POST" {
					body = `{"name":""}`
				}
				w := s.Do(tt.method, tt.target, k, body)
				servertest.WantError(t, w, tt.wantStatus, tt.wantCode)
			})
		}
	})
}

// ------------------------------------------------ errors and the other paths

func TestMethodNotAllowed(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		s.AddPets(key, "")

		tests := []struct {
			method    string
			target    string
			wantAllow []string
		}{
			{"DELETE", "/v1/pets", []string{"GET", "POST"}},
			{"PUT", "/v1/pets", []string{"GET", "POST"}},
			{"PATCH", "/v1/pets", []string{"GET", "POST"}},
			{"PUT", "/v1/pets/1", []string{"GET"}},
			{"DELETE", "/v1/pets/1", []string{"GET"}},
			{"POST", "/v1/pets/1", []string{"GET"}},
			{"POST", "/v1/store/orders", []string{"GET"}},
		}
		for _, tt := range tests {
			t.Run(tt.method+" "+tt.target, func(t *testing.T) {
				w := s.Do(tt.method, tt.target, key, "")
				servertest.WantError(t, w, http.StatusMethodNotAllowed, "method_not_allowed")
				allow := map[string]bool{}
				for _, m := range strings.Split(w.Header().Get("Allow"), ",") {
					allow[strings.TrimSpace(m)] = true
				}
				for _, m := range tt.wantAllow {
					if !allow[m] {
						t.Errorf("Allow = %q, want it to hold %s", w.Header().Get("Allow"), m)
					}
				}
				if allow[tt.method] {
					t.Errorf("Allow = %q holds the refused method %s", w.Header().Get("Allow"), tt.method)
				}
			})
		}
	})
}

func TestStoreOrdersIsNotImplemented(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		t.Run("with a key", func(t *testing.T) {
			servertest.WantError(t, s.Do("GET", "/v1/store/orders", key, ""), http.StatusNotImplemented, "not_implemented")
		})
		t.Run("without a key", func(t *testing.T) {
			w := s.Do("GET", "/v1/store/orders", "", "")
			servertest.WantError(t, w, http.StatusUnauthorized, "unauthorized")
		})
	})
}

func TestPathsOutsideV1(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)

		tests := []struct {
			name       string
			target     string
			wantStatus int
		}{
			{"health check", "/healthz", 200},
			{"readiness check", "/readyz", 200},
			{"pets without the version", "/pets", 404},
			{"another version", "/v2/pets", 404},
			{"unknown file", "/favicon.ico", 404},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := s.Do("GET", tt.target, "", "")
				if tt.wantStatus == 200 {
					if w.Code != http.StatusOK {
						t.Errorf("HTTP status = %d, want 200 without a key; body: %s", w.Code, w.Body)
					}
					testkit.WantJSON(t, w)
					return
				}
				servertest.WantError(t, w, tt.wantStatus, "not_found")
			})
		}
	})
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		tests := []struct {
			name   string
			target string
			key    string
		}{
			{"on a 200", "/v1/pets", key},
			{"on a 401", "/v1/pets", ""},
			{"on a 404", "/v1/pets/999", key},
			{"on a health check", "/healthz", ""},
			{"outside /v1", "/nothing", ""},
		}
		for _, tt := range tests {
			t.Run("echoed "+tt.name, func(t *testing.T) {
				w := s.Do("GET", tt.target, tt.key, "", "X-Request-Id", "req-42-abc")
				if got := w.Header().Get("X-Request-Id"); got != "req-42-abc" {
					t.Errorf("X-Request-Id = %q, want the one sent, req-42-abc", got)
				}
			})
			t.Run("generated "+tt.name, func(t *testing.T) {
				a := s.Do("GET", tt.target, tt.key, "").Header().Get("X-Request-Id")
				b := s.Do("GET", tt.target, tt.key, "").Header().Get("X-Request-Id")
				if a == "" || b == "" {
					t.Fatalf("X-Request-Id = %q and %q, want one generated", a, b)
				}
				if a == b {
					t.Errorf("two requests got the same X-Request-Id %q", a)
				}
			})
		}
	})
}

// TestEveryErrorHasTheErrorShape walks one request to each error the service
// gives and checks the shape, status and content type of each.
func TestEveryErrorHasTheErrorShape(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		tests := []struct {
			name       string
			method     string
			target     string
			key        string
			body       string
			header     []string
			wantStatus int
			wantCode   string
		}{
			{"bad query parameter", "GET", "/v1/pets?limit=0", key, "", nil, 400, "invalid_request"},
			{"bad body value", "POST", "/v1/pets", key, `{"name":"Rex"}`, nil, 400, "invalid_request"},
			{"body not JSON", "POST", "/v1/pets", key, `{`, nil, 400, "invalid_json"},
			{"bad path parameter", "GET", "/v1/pets/x", key, "", nil, 400, "invalid_request"},
			{"no key", "GET", "/v1/pets", "", "", nil, 401, "unauthorized"},
			{"unknown pet", "GET", "/v1/pets/12345", key, "", nil, 404, "not_found"},
			{"unknown path", "GET", "/v1/unknown", key, "", nil, 404, "not_found"},
			{"path outside /v1", "GET", "/unknown", "", "", nil, 404, "not_found"},
			{"wrong method", "DELETE", "/v1/pets", key, "", nil, 405, "method_not_allowed"},
			{"body too large", "POST", "/v1/pets", key, apiPadBody(100 << 10), nil, 413, "payload_too_large"},
			{"wrong content type", "POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`, []string{"Content-Type", "text/plain"}, 415, "unsupported_media_type"},
			{"idempotency key too long", "POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 400, "invalid_request"},
			{"store orders", "GET", "/v1/store/orders", key, "", nil, 501, "not_implemented"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				w := s.Do(tt.method, tt.target, tt.key, tt.body, tt.header...)
				servertest.WantError(t, w, tt.wantStatus, tt.wantCode)
			})
		}
	})
}

// ------------------------------------------------------------- the error codes (README, "Error codes")

// TestSpecErrorTable has one row per line of the error codes (README, "Error codes"), on each operation it
// applies to.
func TestSpecErrorTable(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "business", func(t *testing.T, s *servertest.Server, key string) {
		pets := s.AddPets(key, "available")
		existing := "/v1/pets/" + strconv.FormatInt(pets[0].ID, 10)

		tests := []struct {
			name       string
			method     string
			target     string
			key        string
			body       string
			wantStatus int
			wantCode   string
		}{
			{"400: createPet with a required field missing", "POST", "/v1/pets", key, `{"name":"Rex"}`, 400, "invalid_request"},
			{"400: createPet with an invalid value", "POST", "/v1/pets", key, `{"name":"Rex","categoryId":1,"status":"lost"}`, 400, "invalid_request"},
			{"401: listPets without a key", "GET", "/v1/pets", "", "", 401, "unauthorized"},
			{"401: createPet without a key", "POST", "/v1/pets", "", `{"name":"Rex","categoryId":1}`, 401, "unauthorized"},
			{"401: getPet without a key", "GET", existing, "", "", 401, "unauthorized"},
			{"401: listPets with an invalid key", "GET", "/v1/pets", "psk_live_invalid", "", 401, "unauthorized"},
			{"401: createPet with an invalid key", "POST", "/v1/pets", "psk_live_invalid", `{"name":"Rex","categoryId":1}`, 401, "unauthorized"},
			{"401: getPet with an invalid key", "GET", existing, "psk_live_invalid", "", 401, "unauthorized"},
			{"404: getPet of an animal not there", "GET", "/v1/pets/424242", key, "", 404, "not_found"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := testkit.PetCount(s.T, s.Do, key)
				w := s.Do(tt.method, tt.target, tt.key, tt.body)
				servertest.WantError(t, w, tt.wantStatus, tt.wantCode)
				if after := testkit.PetCount(s.T, s.Do, key); after != before {
					t.Errorf("pets went from %d to %d after a %d", before, after, tt.wantStatus)
				}
			})
		}
	})
}

// TestTooManyRequests is the error codes (README, "Error codes")'s 429 row: on any API request, with
// Retry-After, after which the client is served again.
func TestTooManyRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		withKey bool
		method  string
		target  string
		body    string
		wantOK  int // the status once the wait is over
	}{
		{"listPets over a Free key's minute", true, "GET", "/v1/pets", "", 200},
		{"createPet over a Free key's minute", true, "POST", "/v1/pets", `{"name":"Rex","categoryId":1}`, 201},
		{"getPet over a Free key's minute", true, "GET", "/v1/pets/1", "", 404},
		{"store orders over a Free key's minute", true, "GET", "/v1/store/orders", "", 501},
		{"no key, over the client address's minute", false, "GET", "/v1/pets", "", 401},
	}
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := servertest.Start(t, opts)
				key := ""
				if tt.withKey {
					key = s.MustCreateKey("free")
				}
				for i := 0; i < 60; i++ {
					if w := s.Do("GET", "/v1/pets", key, ""); w.Code == http.StatusTooManyRequests {
						t.Fatalf("request %d of 60 got 429", i+1)
					}
				}
				w := s.Do(tt.method, tt.target, key, tt.body)
				servertest.WantError(t, w, http.StatusTooManyRequests, "rate_limited")
				retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
				if err != nil || retry < 1 {
					t.Fatalf("Retry-After = %q, want whole seconds >= 1", w.Header().Get("Retry-After"))
				}
				s.Clock.Advance(time.Duration(retry) * time.Second)
				if w := s.Do(tt.method, tt.target, key, tt.body); w.Code != tt.wantOK {
					t.Errorf("after waiting Retry-After: HTTP status = %d, want %d; body: %s", w.Code, tt.wantOK, w.Body)
				}
			})
		}
	})
}

func TestOpenAPIDocumentNeedsNoKey(t *testing.T) {
	t.Parallel()
	servertest.EachStore(t, func(t *testing.T, opts servertest.Options) {
		s := servertest.Start(t, opts)
		for _, key := range []string{"", s.MustCreateKey("business")} {
			w := s.Do("GET", "/v1/openapi.yaml", key, "")
			if w.Code != http.StatusOK {
				t.Fatalf("key %q: HTTP status = %d, want 200; body: %.200s", key, w.Code, w.Body)
			}
			if !strings.HasPrefix(w.Body.String(), "openapi: 3.1") {
				t.Errorf("body does not start with openapi: 3.1: %.80q", w.Body)
			}
		}
	})
}

// TestConcurrentCreatesAreListedOnceInOrder creates pets from many clients at
// once while others list: every 201's pet is listed once, in ascending id
// order, and ids are never given twice.
func TestConcurrentCreatesAreListedOnceInOrder(t *testing.T) {
	t.Parallel()
	apiEachReadMode(t, []string{"available", ""}, func(t *testing.T, s *servertest.Server, key string, seeded []testkit.Pet) {
		const writers, perWriter = 8, 10
		created := make(chan int64, writers*perWriter)
		statuses := []string{"available", "pending", "sold", ""}
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range perWriter {
					body := fmt.Sprintf(`{"name":"W%d-%d","categoryId":1}`, w, i)
					if st := statuses[(w+i)%len(statuses)]; st != "" {
						body = fmt.Sprintf(`{"name":"W%d-%d","categoryId":1,"status":%q}`, w, i, st)
					}
					r := s.Do("POST", "/v1/pets", key, body)
					if r.Code != http.StatusCreated {
						t.Errorf("create: HTTP status = %d; body: %s", r.Code, r.Body)
						return
					}
					var p testkit.Pet
					if err := json.Unmarshal(r.Body.Bytes(), &p); err != nil {
						t.Errorf("create: %v", err)
						return
					}
					created <- p.ID
				}
			})
		}
		for range 4 {
			wg.Go(func() {
				for range 20 {
					r := s.Do("GET", "/v1/pets?limit=7&status=available", key, "")
					if r.Code != http.StatusOK {
						t.Errorf("list while creating: HTTP status = %d; body: %s", r.Code, r.Body)
						return
					}
				}
			})
		}
		wg.Wait()
		close(created)

		want := testkit.PetIDs(seeded)
		for id := range created {
			want = append(want, id)
		}
		slices.Sort(want)
		if len(slices.Compact(slices.Clone(want))) != len(want) {
			t.Fatalf("an id was given twice: %v", want)
		}
		var seen []int64
		for target := "/v1/pets?limit=9"; ; {
			w := s.Do("GET", target, key, "")
			seen = append(seen, testkit.PetIDs(testkit.ReadPets(t, w))...)
			next, ok := testkit.NextLink(t, w)
			if !ok {
				break
			}
			target = next
		}
		if !slices.Equal(seen, want) {
			t.Errorf("listed ids %v, want each created id once, ascending: %v", seen, want)
		}
	})
}

func TestABodyCutShortIsCalledCutShort(t *testing.T) {
	t.Parallel()
	servertest.EachStoreWithKey(t, "pro", func(t *testing.T, s *servertest.Server, key string) {
		for _, body := range []string{`{`, `{"name":`, `{"name":"a",`, `{"name":"a","categoryId":1`} {
			w := s.Do("POST", "/v1/pets", key, body)
			servertest.WantError(t, w, 400, "invalid_json", "ends in the middle")
		}
		servertest.WantError(t, s.Do("POST", "/v1/pets", key, " ", "Content-Type", "application/json"), 400, "invalid_json", "empty")
	})
}

// Small bodies get their Content-Length from net/http, large ones from
// writeBody: every answer has one, none is chunked.
func TestEveryResponseHasAContentLength(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Options{PetsFromDatabase: true})
	testkit.SeedPets(t, s.SQLite.Writer(), 300)
	if err := s.LoadPets(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := s.MustCreateKey("enterprise", domain.Limits{PerMinute: 1000, PerDay: 1000})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, tt := range []struct{ name, method, path, body string }{
		{"a page of 20", "GET", "/v1/pets?limit=20", ""},
		{"a page of 100, larger than net/http buffers", "GET", "/v1/pets?limit=100", ""},
		{"a page of 100 by HEAD", "HEAD", "/v1/pets?limit=100", ""},
		{"a page of 20 by HEAD", "HEAD", "/v1/pets?limit=20", ""},
		{"a body too large, answered with Connection: close", "POST", "/v1/pets", `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`},
		{"one pet", "GET", "/v1/pets/7", ""},
		{"a create", "POST", "/v1/pets", `{"name":"Rex","categoryId":1}`},
		{"an error", "GET", "/v1/pets?limit=0", ""},
		{"the OpenAPI document", "GET", "/v1/openapi.yaml", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(resp.TransferEncoding) > 0 || resp.ContentLength < 0 {
				t.Fatalf("status %d, Transfer-Encoding %v, Content-Length %d", resp.StatusCode, resp.TransferEncoding, resp.ContentLength)
			}
			if tt.method != "HEAD" && resp.ContentLength != int64(len(body)) {
				t.Errorf("Content-Length %d for a body of %d bytes", resp.ContentLength, len(body))
			}
			if tt.method == "HEAD" && resp.ContentLength == 0 {
				t.Errorf("HEAD: Content-Length 0")
			}
		})
	}
}
