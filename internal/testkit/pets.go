package testkit

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// SeedPets inserts n pets into a SQLite database in one transaction,
// statuses in turn: a large table in a fraction of the time creates take.
func SeedPets(tb testing.TB, db *sql.DB, n int) {
	tb.Helper()
	tx, err := db.Begin()
	if err != nil {
		tb.Fatal(err)
	}
	stmt, err := tx.Prepare(`INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?)`)
	if err != nil {
		tb.Fatal(err)
	}
	statuses := []any{"available", "pending", "sold", nil}
	for i := range n {
		if _, err := stmt.Exec("pet-"+strconv.Itoa(i), i%50+1, statuses[i%4]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// Pet is a Pet as a client reads it off the wire.
type Pet struct {
	ID         int64   `json:"id"`
	Name       string  `json:"name"`
	CategoryID int64   `json:"categoryId"`
	Status     *string `json:"status"`
}

// WantJSON fails unless the response says its body is application/json.
func WantJSON(t testing.TB, w *httptest.ResponseRecorder) {
	t.Helper()
	ct := w.Header().Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

// ReadPet decodes one Pet and checks it has exactly the fields of openapi.yaml:
// id, name, categoryId and, when given, a non-null status.
func ReadPet(t testing.TB, raw []byte) Pet {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("pet is not a JSON object: %v: %s", err, raw)
	}
	for name := range fields {
		switch name {
		case "id", "name", "categoryId", "status":
		default:
			t.Errorf("pet has unexpected field %q: %s", name, raw)
		}
	}
	for _, name := range []string{"id", "name", "categoryId"} {
		if _, ok := fields[name]; !ok {
			t.Errorf("pet has no %q: %s", name, raw)
		}
	}
	if st, ok := fields["status"]; ok && string(st) == "null" {
		t.Errorf("pet has status null; it must be absent instead: %s", raw)
	}
	var p Pet
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("pet fields have the wrong types: %v: %s", err, raw)
	}
	return p
}

// ReadPets decodes a listPets body, which must be a plain JSON array.
func ReadPets(t testing.TB, w *httptest.ResponseRecorder) []Pet {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("list: HTTP status = %d, want 200; body: %s", w.Code, w.Body)
	}
	WantJSON(t, w)
	body := bytes.TrimSpace(w.Body.Bytes())
	if len(body) == 0 || body[0] != '[' {
		t.Fatalf("list body is not a JSON array: %s", body)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		t.Fatalf("list body is not a JSON array: %v: %s", err, body)
	}
	pets := make([]Pet, 0, len(raws))
	for _, raw := range raws {
		pets = append(pets, ReadPet(t, raw))
	}
	return pets
}

var NextLinkRE = regexp.MustCompile(`^<([^>]*)>;\s*rel="next"$`)

// StoredByName reads every pet the database holds: the ids stored under
// each name.
func StoredByName(t *testing.T, store PetScanner) map[string][]int64 {
	t.Helper()
	stored := map[string][]int64{}
	for after := int64(0); ; {
		n, err := store.ScanPets(context.Background(), after, 1000, func(id int64, name []byte, _ int64, _ []byte) {
			stored[string(name)] = append(stored[string(name)], id)
			after = id
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < 1000 {
			return stored
		}
	}
}

// PetScanner reads the pets a store holds in id order, as the stores do.
type PetScanner interface {
	ScanPets(ctx context.Context, after int64, limit int, fn func(id int64, name []byte, categoryID int64, status []byte)) (int, error)
}

// AddPets creates one pet per status through the API ("" gives none) and
// returns them as created.
func AddPets(t testing.TB, do func(method, target, key, body string, header ...string) *httptest.ResponseRecorder, key string, statuses ...string) []Pet {
	t.Helper()
	var pets []Pet
	for i, st := range statuses {
		body := fmt.Sprintf(`{"name":"Pet %d","categoryId":%d}`, i, 1+i%3)
		if st != "" {
			body = fmt.Sprintf(`{"name":"Pet %d","categoryId":%d,"status":%q}`, i, 1+i%3, st)
		}
		w := do("POST", "/v1/pets", key, body)
		if w.Code != http.StatusCreated {
			t.Fatalf("create pet %s: HTTP status = %d; body: %s", body, w.Code, w.Body)
		}
		pets = append(pets, ReadPet(t, w.Body.Bytes()))
	}
	return pets
}

// PetCount is how many pets a list shows (up to 100), asked through do.
func PetCount(t testing.TB, do func(method, target, key, body string, header ...string) *httptest.ResponseRecorder, key string) int {
	t.Helper()
	return len(ReadPets(t, do("GET", "/v1/pets?limit=100", key, "")))
}

// PetIDs are the ids of pets, in their order.
func PetIDs(pets []Pet) []int64 {
	ids := make([]int64, len(pets))
	for i, p := range pets {
		ids[i] = p.ID
	}
	return ids
}

// NextLink returns the target of the response's Link rel="next", if any.
func NextLink(t testing.TB, w *httptest.ResponseRecorder) (string, bool) {
	t.Helper()
	for _, v := range w.Header().Values("Link") {
		if m := NextLinkRE.FindStringSubmatch(v); m != nil {
			return m[1], true
		}
		if strings.Contains(v, `rel="next"`) {
			t.Fatalf("Link %q is not of the form </v1/pets?...>; rel=\"next\"", v)
		}
	}
	return "", false
}

// AllPets reads every pet a running server at base lists, from the page at
// target on (/v1/pets?limit=100 for all of them), following Link
// rel="next": one listing reads the thousands of pets that one GET each
// would. It checks that the ids ascend strictly across pages.
func AllPets(t testing.TB, client *http.Client, base, key, target string) []Pet {
	t.Helper()
	var all []Pet
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatalf("listPets pagination does not end")
		}
		resp, body := Fetch(t, client, "GET", base+target, key, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d: %s", target, resp.StatusCode, body)
		}
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(body), &raw); err != nil {
			t.Fatalf("GET %s: not a JSON array: %v: %s", target, err, body)
		}
		for _, r := range raw {
			p := ReadPet(t, r)
			if n := len(all); n > 0 && p.ID <= all[n-1].ID {
				t.Fatalf("GET %s: id %d after id %d; ids must ascend strictly, without repeats", target, p.ID, all[n-1].ID)
			}
			all = append(all, p)
		}
		next := ""
		for _, v := range resp.Header.Values("Link") {
			if m := NextLinkRE.FindStringSubmatch(v); m != nil {
				next = m[1]
			}
		}
		if next == "" {
			return all
		}
		if len(raw) == 0 {
			t.Fatalf("GET %s: an empty page with a Link rel=\"next\"", target)
		}
		target = next
	}
}
