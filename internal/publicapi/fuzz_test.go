package publicapi_test

// Fuzz targets for every parser that takes client bytes: the createPet body,
// the listPets query string, the petId path segment, the Authorization and
// Idempotency-Key headers, and the JSON string writer every response goes
// through. Plain `go test` runs each target's seeds (the f.Add calls and
// testdata/fuzz/FuzzXxx); `go test -run='^$' -fuzz='^FuzzXxx$' .` explores
// further, and keeps any input that fails in testdata/fuzz/FuzzXxx.
//
// The handler targets share one server per target (and per fuzzing worker
// process): the work per input stays a request or two.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/keyring"
	"petstore/internal/petcopy"
	"petstore/internal/publicapi"
	"petstore/internal/servertest"
	"petstore/internal/testkit"
)

// Fixed tokens, so that the seed corpus can hold them and the fuzzer can
// mutate a key that works. Only fuzzToken is an active key of the fuzz
// servers; fuzzRevokedToken is stored and revoked, fuzzUnknownToken has a
// right checksum but is not stored, and fuzzStagingToken belongs to the
// other environment.
var (
	fuzzToken        = checksummed("psk_live_FuzzFuzzFuzzFuzzFuzzFuzzFuzzFuzz")
	fuzzRevokedToken = checksummed("psk_live_RevokedRevokedRevokedRevokedRevo")
	fuzzUnknownToken = checksummed("psk_live_UnknownUnknownUnknownUnknownUnkn")
	fuzzStagingToken = checksummed("psk_test_FuzzFuzzFuzzFuzzFuzzFuzzFuzzFuzz")
)

func checksummed(body string) string {
	return string(domain.AppendChecksum([]byte(body), []byte(body)))
}

// fuzzServer is the real handler on a real SQLite file, made once per fuzz
// target. The same service is built twice over one store: handler
// answers pet reads from the in-memory copy, fromDB from SQLite, as while
// the copy is being made after a start. Both must answer alike.
type fuzzServer struct {
	handler http.Handler
	fromDB  http.Handler
	pets    *petcopy.Cache
	clock   *servertest.Clock
	log     *testkit.SyncBuffer // error log lines (a 500's cause), for the failure message
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	ctx := context.Background()
	for _, token := range []string{fuzzToken, fuzzRevokedToken, fuzzUnknownToken} {
		if problem := keyring.KeyProblem(token, "production"); problem.Reason != 0 {
			f.Fatalf("fixed fuzz token %s: %s", token, problem.Message)
		}
	}
	log := &testkit.SyncBuffer{}
	s := servertest.Start(f, servertest.Options{Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelError}))})
	for _, token := range []string{fuzzToken, fuzzRevokedToken} {
		hash := domain.HashKey(token)
		k, err := s.Store().CreateKey(ctx, domain.Key{Hash: hash[:], Name: "fuzz", Plan: "enterprise",
			PerMinute: 1 << 50, PerDay: 1 << 50, Env: "production", Scopes: domain.AllScopes}, servertest.Actor)
		if err != nil {
			f.Fatal(err)
		}
		if token == fuzzRevokedToken {
			if _, err := s.Store().RevokeKey(ctx, k.ID, servertest.Actor); err != nil {
				f.Fatal(err)
			}
		}
	}
	if err := s.Keys().Refresh(ctx); err != nil {
		f.Fatal(err)
	}
	// The same service with reads from the database, as while its copy
	// of the pets is being made.
	return &fuzzServer{
		handler: s.Handler(),
		fromDB:  s.ReadingFromDatabase().Handler(),
		pets:    s.Pets(),
		clock:   s.Clock,
		log:     log,
	}
}

// addPets creates pets with the given statuses through the API and returns
// them as created.
func (s *fuzzServer) addPets(f *testing.F, statuses ...string) []domain.Pet {
	f.Helper()
	var added []domain.Pet
	for i, st := range statuses {
		body := fmt.Sprintf(`{"name":"Pet %d","categoryId":%d}`, i, 1+i%3)
		if st != "" {
			body = fmt.Sprintf(`{"name":"Pet %d","categoryId":%d,"status":%q}`, i, 1+i%3, st)
		}
		w := httptest.NewRecorder()
		s.handler.ServeHTTP(w, fuzzRequest("POST", "/v1/pets", body))
		var p struct {
			ID         int64  `json:"id"`
			Name       string `json:"name"`
			CategoryID int64  `json:"categoryId"`
			Status     string `json:"status"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &p); w.Code != http.StatusCreated || err != nil {
			f.Fatalf("create pet %s: %d %s", body, w.Code, w.Body)
		}
		added = append(added, domain.Pet{ID: p.ID, Name: p.Name, CategoryID: p.CategoryID, Status: p.Status})
	}
	return added
}

// petCount is how many pets the server's copy holds: one more for each
// pet created.
func (s *fuzzServer) petCount(t *testing.T) int {
	n, ok := s.pets.Size()
	if !ok {
		t.Fatal("the copy of the pets is not complete")
	}
	return n
}

// send serves req on h and fails the input on any 5xx: no client bytes may
// make the service fail.
func (s *fuzzServer) send(t *testing.T, h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code >= 500 {
		t.Fatalf("%s %s: HTTP status %d; body: %s\nlog: %s", req.Method, req.URL, w.Code, w.Body, s.log.String())
	}
	return w
}

// fuzzRequest is a request with the fuzz servers' working key.
func fuzzRequest(method, target, body string) *http.Request {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+fuzzToken)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// ---------------------------------------------------------------- createPet

// FuzzCreatePetBody sends the input as the body of createPet. A 201 must
// round-trip (getPet answers the same bytes, from memory and from SQLite,
// and encoding/json reads the same pet from the request); a rejection is a
// 400 in the Error shape. Whether it is accepted is checked against a
// reference built from encoding/json and docs/api.md's rules.
func FuzzCreatePetBody(f *testing.F) {
	for _, body := range []string{
		`{"name":"Rex","categoryId":1}`,
		`{"name":"Rex","categoryId":1,"status":"available"}`,
		`{"status":"sold","categoryId":9223372036854775807,"name":"Ünïcödé \u2028 😀"}`,
		` { "name" : "Rex" , "categoryId" : 1 } ` + "\n",
		`{"name":"Rex","categoryId":1}{"name":"Rex","categoryId":1}`,
		`{"name":"Rex","categoryId":1} x`,
		`{"name":"Rex","categoryId":0}`,
		`{"name":"Rex","categoryId":-1}`,
		`{"name":"Rex","categoryId":1.0}`,
		`{"name":"Rex","categoryId":1e3}`,
		`{"name":"Rex","categoryId":9223372036854775808}`,
		`{"name":"Rex","categoryId":"1"}`,
		`{"name":"Rex","categoryId":null}`,
		`{"name":"Rex"}`,
		`{"categoryId":1}`,
		`{"name":"","categoryId":1}`,
		`{"name":"   ","categoryId":1}`,
		`{"name":null,"categoryId":1}`,
		`{"name":1,"categoryId":1}`,
		`{"name":"a\u0000b","categoryId":1}`,
		`{"name":"` + strings.Repeat("é", 200) + `","categoryId":1}`,
		`{"name":"` + strings.Repeat("é", 201) + `","categoryId":1}`,
		`{"name":"\ud800","categoryId":1}`,
		"{\"name\":\"\xff\xfe\",\"categoryId\":1}",
		`{"name":"Rex","categoryId":1,"status":"lost"}`,
		`{"name":"Rex","categoryId":1,"status":""}`,
		`{"name":"Rex","categoryId":1,"status":null}`,
		`{"name":"Rex","categoryId":1,"status":"AVAILABLE"}`,
		`{"name":"Rex","categoryId":1,"owner":"me"}`,
		`{"Name":"Rex","categoryId":1}`,
		`{"name":"Rex","name":"Max","categoryId":1}`,
		`{"name":"Rex","categoryId":2,"status":"sold","categoryId":1,"status":"pending"}`,
		`null`, `[]`, `"Rex"`, `1`, `{`, ``, `{}`, "\ufeff{}",
	} {
		f.Add(body)
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body string) {
		w := s.send(t, s.handler, fuzzRequest("POST", "/v1/pets", body))
		accept, wantCode := createPetReference(body)
		if w.Code != http.StatusCreated {
			code := servertest.WantError(t, w, 0, "")
			if w.Code != http.StatusBadRequest {
				t.Fatalf("HTTP status = %d for a small body with the right Content-Type, want 201 or 400; body: %s", w.Code, w.Body)
			}
			if accept {
				t.Fatalf("body %q: refused with %s, but it is a valid pet", body, w.Body)
			}
			if code != wantCode {
				t.Fatalf("body %q: error code %q, want %q; body: %s", body, code, wantCode, w.Body)
			}
			return
		}
		if !accept {
			t.Fatalf("body %q: 201 %s, but docs/api.md refuses it (%s)", body, w.Body, wantCode)
		}
		testkit.WantJSON(t, w)
		got := testkit.ReadPet(t, w.Body.Bytes())
		if loc, want := w.Header().Get("Location"), "/v1/pets/"+strconv.FormatInt(got.ID, 10); loc != want {
			t.Errorf("Location = %q, want %q", loc, want)
		}

		// The request as encoding/json reads it.
		var in struct {
			Name       string  `json:"name"`
			CategoryID int64   `json:"categoryId"`
			Status     *string `json:"status"`
		}
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatalf("body %q: 201, but encoding/json cannot read it: %v", body, err)
		}
		if got.Name != in.Name || got.CategoryID != in.CategoryID || !equalStatus(got.Status, in.Status) {
			t.Fatalf("body %q: created %s, but encoding/json reads name %q, categoryId %d, status %v",
				body, w.Body, in.Name, in.CategoryID, in.Status)
		}

		// getPet answers the same bytes, from memory and from SQLite.
		for name, h := range map[string]http.Handler{"memory": s.handler, "database": s.fromDB} {
			g := s.send(t, h, fuzzRequest("GET", "/v1/pets/"+strconv.FormatInt(got.ID, 10), ""))
			if g.Code != http.StatusOK || !bytes.Equal(g.Body.Bytes(), w.Body.Bytes()) {
				t.Fatalf("GET the created pet (%s): %d %s, want 200 %s", name, g.Code, g.Body, w.Body)
			}
		}
	})
}

func equalStatus(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// createPetReference says whether docs/api.md accepts body as a createPet body
// and, when not, the error code: invalid_json unless the body is one JSON
// object, else invalid_request. It reads JSON with encoding/json alone, and
// looks at every member: a member given twice is refused, as a query
// parameter given twice is (it is ambiguous, and {"name":null,"name":"Rex"}
// must not pass for a valid name).
func createPetReference(body string) (accept bool, code string) {
	if !json.Valid([]byte(body)) || strings.TrimLeft(body, " \t\r\n")[0] != '{' {
		return false, httpapi.CodeInvalidJSON
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if _, err := dec.Token(); err != nil { // the '{'
		return false, httpapi.CodeInvalidJSON
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		name, isName := tok.(string)
		var value json.RawMessage
		if err != nil || !isName || dec.Decode(&value) != nil {
			return false, httpapi.CodeInvalidJSON // json.Valid said otherwise
		}
		if seen[name] || !validPetMember(name, value) {
			return false, httpapi.CodeInvalidRequest
		}
		seen[name] = true
	}
	if !seen["name"] || !seen["categoryId"] {
		return false, httpapi.CodeInvalidRequest
	}
	return true, ""
}

// validPetMember says whether one member of a createPet body is valid.
func validPetMember(name string, value json.RawMessage) bool {
	if string(value) == "null" {
		return false
	}
	switch name {
	case "name":
		var s string
		// encoding/json reads invalid UTF-8 and lone surrogates as U+FFFD;
		// the service refuses such a name rather than change it.
		return json.Unmarshal(value, &s) == nil && !strings.ContainsRune(s, utf8.RuneError) && strings.TrimSpace(s) != "" &&
			utf8.RuneCountInString(s) <= httpapi.MaxNameRunes && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
	case "categoryId":
		var n int64
		return json.Unmarshal(value, &n) == nil && n >= 1
	case "status":
		var s string
		return json.Unmarshal(value, &s) == nil && domain.KnownStatus(s)
	}
	return false
}

// ---------------------------------------------------------------- listPets

// fuzzListStatuses are the statuses of the pets FuzzListQuery lists: enough
// of each for pages and cursors to matter.
var fuzzListStatuses = []string{"", "available", "pending", "sold", "available", "available", "", "sold"}

// FuzzListQuery sends the input as the raw query string of listPets. The
// answer is a 400 in the Error shape exactly when parseListQuery refuses
// the query; otherwise a 200 with the very page the query asks for (ids
// above the cursor, of the status, at most limit, ascending) and a Link
// rel="next" exactly when more pets follow, whose cursor continues after
// the page. The in-memory copy and SQLite answer alike.
func FuzzListQuery(f *testing.F) {
	for _, raw := range []string{
		"", "limit=1", "limit=5&status=available", "status=sold", "limit=100", "limit=0", "limit=101",
		"limit=abc", "limit=1.5", "limit=+5", "limit=-1", "limit=007", "limit=", "limit", "limit=1&limit=2",
		"status=lost", "status=", "status=available&status=sold", "status=avail%61ble", "status=Available",
		"cursor=" + domain.EncodeCursor(3), "limit=2&status=available&cursor=" + domain.EncodeCursor(5),
		"cursor=" + domain.EncodeCursor(1<<62), "cursor=", "cursor=abc", "cursor=YWZ0ZXI6MA", "cursor=YWZ0ZXI6LTE",
		"cursor=" + domain.EncodeCursor(3) + "%0A", "cursor=" + domain.EncodeCursor(3) + "=",
		"%zz=1", "limit=%zz", "limit=%31", "a=b&&&limit=2;x=y", "unknown=1&limit=3", "=", "&", "limit=3#frag",
		"limit=2+", "status=sold+", "limit=1&cursor=" + domain.EncodeCursor(2) + "&cursor=" + domain.EncodeCursor(3),
	} {
		f.Add(raw)
	}
	s := newFuzzServer(f)
	all := s.addPets(f, append(append(fuzzListStatuses, fuzzListStatuses...), fuzzListStatuses...)...)
	f.Fuzz(func(t *testing.T, raw string) {
		q, parseErr := publicapi.ParseListQuery(raw)
		var ws [2]*httptest.ResponseRecorder
		for i, h := range []http.Handler{s.handler, s.fromDB} {
			req := fuzzRequest("GET", "/v1/pets", "")
			req.URL.RawQuery = raw
			ws[i] = s.send(t, h, req)
		}
		w := ws[0]
		if ws[1].Code != w.Code || ws[1].Body.String() != w.Body.String() ||
			!slices.Equal(ws[1].Header().Values("Link"), w.Header().Values("Link")) {
			t.Fatalf("query %q: the in-memory copy answers %d %v %s, SQLite %d %v %s", raw,
				w.Code, w.Header().Values("Link"), w.Body, ws[1].Code, ws[1].Header().Values("Link"), ws[1].Body)
		}
		if parseErr != nil {
			if code := servertest.WantError(t, w, 0, ""); w.Code != http.StatusBadRequest || code != httpapi.CodeInvalidRequest {
				t.Fatalf("query %q: %d %s, want 400 invalid_request (%v)", raw, w.Code, code, parseErr)
			}
			return
		}

		var want []domain.Pet
		for _, p := range all {
			if p.ID > q.After && (q.Status == "" || p.Status == q.Status) {
				want = append(want, p)
			}
		}
		more := len(want) > q.Limit
		want = want[:min(len(want), q.Limit)]
		got := testkit.ReadPets(t, w)
		if len(got) != len(want) {
			t.Fatalf("query %q: %d pets, want %d: %s", raw, len(got), len(want), w.Body)
		}
		for i, p := range got {
			st := ""
			if p.Status != nil {
				st = *p.Status
			}
			if p.ID != want[i].ID || p.Name != want[i].Name || p.CategoryID != want[i].CategoryID || st != want[i].Status {
				t.Fatalf("query %q: pet %d is %+v, want %+v; body: %s", raw, i, p, want[i], w.Body)
			}
		}

		next, hasNext := testkit.NextLink(t, w)
		if hasNext != more {
			t.Fatalf("query %q: Link rel=\"next\" present = %v, want %v (%d pets follow the page); Link: %q",
				raw, hasNext, more, len(want), w.Header().Values("Link"))
		}
		if !hasNext {
			return
		}
		u, err := url.Parse(next)
		if err != nil || u.Path != "/v1/pets" || u.IsAbs() || u.Host != "" {
			t.Fatalf("query %q: Link target %q is not a relative reference to /v1/pets (%v)", raw, next, err)
		}
		nq, err := publicapi.ParseListQuery(u.RawQuery)
		if err != nil {
			t.Fatalf("query %q: the next link's query %q is refused: %v", raw, u.RawQuery, err)
		}
		if wantNext := (petcopy.Query{Limit: q.Limit, Status: q.Status, After: want[len(want)-1].ID}); nq != wantNext {
			t.Fatalf("query %q: the next link %q reads as %+v, want %+v", raw, next, nq, wantNext)
		}
	})
}

// FuzzParseListQuery checks parseListQuery and the cursor on their own,
// where they are cheap: eachQueryParam agrees with url.ParseQuery, a query is
// refused exactly when docs/api.md says so, an accepted query re-encodes to
// itself, and domain.EncodeCursor(n) decodes to n for every n >= 1 (and to nothing
// for n < 1).
func FuzzParseListQuery(f *testing.F) {
	for _, seed := range []struct {
		raw string
		n   int64
	}{
		{"", 1}, {"limit=5&status=available&cursor=" + domain.EncodeCursor(5), 5}, {"limit=0", 0},
		{"limit=%zz", -1}, {"a;b=c", 1 << 62}, {"limit=1&limit=1", 9223372036854775807},
		{"cursor=YWZ0ZXI6MDAx", 1}, {"cursor=" + domain.EncodeCursor(7) + "%0D%0A", 7}, {"status=pending&x=%", 2},
		{"limit=0100", 100}, {"limit=00000000000000000000000000000000000000001", 1},
	} {
		f.Add(seed.raw, seed.n)
	}
	f.Fuzz(func(t *testing.T, raw string, n int64) {
		c := domain.EncodeCursor(n)
		if strings.ContainsFunc(c, func(r rune) bool { return !strings.ContainsRune(domain.Base62+"-_", r) }) {
			t.Errorf("EncodeCursor(%d) = %q needs escaping in a URL", n, c)
		}
		if after, ok := domain.DecodeCursor(c); ok != (n >= 1) || (ok && after != n) {
			t.Errorf("DecodeCursor(EncodeCursor(%d)) = %d, %v", n, after, ok)
		}
		if after, ok := domain.DecodeCursor(raw); ok {
			if after < 1 {
				t.Errorf("DecodeCursor(%q) = %d, want an id >= 1", raw, after)
			}
			if again, ok := domain.DecodeCursor(domain.EncodeCursor(after)); !ok || again != after {
				t.Errorf("cursor %q decodes to %d, whose own cursor decodes to %d, %v", raw, after, again, ok)
			}
		}

		values := url.Values{}
		paramErr := publicapi.EachQueryParam(raw, func(name, value string) { values[name] = append(values[name], value) })
		if !strings.Contains(raw, ";") { // url.ParseQuery refuses ';', eachQueryParam takes it as data
			ref, refErr := url.ParseQuery(raw)
			if (paramErr == nil) != (refErr == nil) || (paramErr == nil && !maps.EqualFunc(values, ref, slices.Equal)) {
				t.Fatalf("publicapi.EachQueryParam(%q) gives %v, %v; url.ParseQuery gives %v, %v", raw, values, paramErr, ref, refErr)
			}
		}

		q, err := publicapi.ParseListQuery(raw)
		if err != nil {
			var e *httpapi.Error
			if !errors.As(err, &e) || e.Code != httpapi.CodeInvalidRequest || e.Message == "" {
				t.Fatalf("publicapi.ParseListQuery(%q) error %#v is not an invalid_request Error", raw, err)
			}
		}
		want, wantOK := listQueryReference(values)
		if paramErr != nil {
			wantOK = false
		}
		if raw == "" {
			want, wantOK = petcopy.Query{Limit: httpapi.DefaultPageSize}, true
		}
		if (err == nil) != wantOK || (wantOK && q != want) {
			t.Fatalf("publicapi.ParseListQuery(%q) = %+v, %v; want %+v, ok=%v", raw, q, err, want, wantOK)
		}
		if err != nil {
			return
		}
		canonical := "limit=" + strconv.Itoa(q.Limit)
		if q.Status != "" {
			canonical += "&status=" + q.Status
		}
		if q.After != 0 {
			canonical += "&cursor=" + domain.EncodeCursor(q.After)
		}
		if again, err := publicapi.ParseListQuery(canonical); err != nil || again != q {
			t.Fatalf("query %q reads as %+v, but its canonical form %q reads as %+v, %v", raw, q, canonical, again, err)
		}
	})
}

// listQueryReference applies docs/api.md's rules to parsed query values: each
// of limit, status and cursor at most once; limit a decimal integer 1..100
// (default 20); status one of the enum; cursor "after:<id>" in unpadded
// base64url, id an int64 >= 1. Other parameters are ignored.
func listQueryReference(values url.Values) (petcopy.Query, bool) {
	q := petcopy.Query{Limit: httpapi.DefaultPageSize}
	for _, name := range []string{"limit", "status", "cursor"} {
		if len(values[name]) > 1 {
			return q, false
		}
	}
	if v, ok := values["limit"]; ok {
		digits := strings.TrimLeft(v[0], "0")
		if v[0] == "" || strings.Trim(v[0], "0123456789") != "" || digits == "" || len(digits) > 3 {
			return q, false
		}
		q.Limit, _ = strconv.Atoi(digits)
		if q.Limit > httpapi.MaxPageSize {
			return q, false
		}
	}
	if v, ok := values["status"]; ok {
		if !slices.Contains([]string{"available", "pending", "sold"}, v[0]) {
			return q, false
		}
		q.Status = v[0]
	}
	if v, ok := values["cursor"]; ok {
		id, ok := positiveInt64(strings.TrimPrefix(base64URLDecode(v[0]), "after:"))
		if !ok || !strings.HasPrefix(base64URLDecode(v[0]), "after:") {
			return q, false
		}
		q.After = id
	}
	return q, true
}

// base64URLDecode decodes unpadded base64url by hand, as encoding/base64
// does (it skips \r and \n); "" on any error.
func base64URLDecode(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	if len(s)%4 == 1 {
		return ""
	}
	var out []byte
	var acc, bits uint
	for i := 0; i < len(s); i++ {
		v := strings.IndexByte(alphabet, s[i])
		if v < 0 {
			return ""
		}
		acc, bits = acc<<6|uint(v), bits+6
		if bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
			acc &= 1<<bits - 1
		}
	}
	return string(out)
}

// positiveInt64 reads a decimal int64 >= 1 (leading zeros allowed) without
// strconv: digits only, at most 19 significant, at most int64's maximum.
func positiveInt64(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	digits := strings.TrimLeft(s, "0")
	if digits == "" || len(digits) > len(maxInt64Digits) || (len(digits) == len(maxInt64Digits) && digits > maxInt64Digits) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(digits); i++ {
		n = n*10 + int64(digits[i]-'0')
	}
	return n, true
}

// ---------------------------------------------------------------- getPet

// FuzzPetID sends the input as the petId path segment of getPet (escaped,
// so that it arrives as one segment) and calls parseID on it. An int64
// >= 1 is 200 with that pet or 404; anything else is 400 invalid_request;
// every one carries the deprecation headers.
func FuzzPetID(f *testing.F) {
	for _, seg := range []string{
		"1", "2", "3", "4", "0", "-1", "+1", "01", "007", "1.0", "1e3", " 1", "1 ", "0x1", "abc", "١",
		"9223372036854775807", "9223372036854775808", "00000000000000000000009223372036854775807",
		"-9223372036854775808", "18446744073709551616", "a/b", "1/", "%31", "\x00", "\xff", "1\n",
	} {
		f.Add(seg)
	}
	s := newFuzzServer(f)
	pets := s.addPets(f, "", "available", "sold")
	deprecatedSince, _ := publicapi.Deprecation()
	deprecationHeaders := map[string]string{
		"Deprecation": "@" + strconv.FormatInt(deprecatedSince.Unix(), 10),
		"Sunset":      "Thu, 05 Dec 2030 00:00:00 GMT",
		"Link":        `</v1/pets>; rel="successor-version"`,
	}
	f.Fuzz(func(t *testing.T, seg string) {
		id, ok := domain.ParseID(seg)
		wantID, wantOK := positiveInt64(seg)
		if ok != wantOK || (ok && id != wantID) {
			t.Fatalf("parseID(%q) = %d, %v; want %d, %v", seg, id, ok, wantID, wantOK)
		}
		if seg == "" || seg == "." || seg == ".." {
			return // not a petId: the path is /v1/pets/ or is cleaned to another
		}
		target := "/v1/pets/" + url.PathEscape(seg)
		var ws [2]*httptest.ResponseRecorder
		for i, h := range []http.Handler{s.handler, s.fromDB} {
			ws[i] = s.send(t, h, fuzzRequest("GET", target, ""))
		}
		w := ws[0]
		if ws[1].Code != w.Code || ws[1].Body.String() != w.Body.String() {
			t.Fatalf("petId %q: the in-memory copy answers %d %s, SQLite %d %s", seg, w.Code, w.Body, ws[1].Code, ws[1].Body)
		}
		if _, pattern := getPetRouting.Handler(httptest.NewRequest("GET", target, nil)); pattern != getPetPattern {
			// net/http's ServeMux does not hand every escaped segment to
			// the wildcard (it sends /v1/pets/%2F to "/"): such a request
			// never reaches getPet, and gets the API's 404.
			if code := servertest.WantError(t, w, 0, ""); code != httpapi.CodeNotFound {
				t.Fatalf("petId %q, routed by net/http to %q: %d %s, want 404 not_found", seg, pattern, w.Code, w.Body)
			}
			return
		}
		for name, want := range deprecationHeaders {
			if got := w.Header().Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("petId %q: %d with %s %q, want %q", seg, w.Code, name, got, want)
			}
		}
		switch {
		case !ok:
			if code := servertest.WantError(t, w, 0, ""); w.Code != http.StatusBadRequest || code != httpapi.CodeInvalidRequest {
				t.Fatalf("petId %q: %d %s, want 400 invalid_request", seg, w.Code, code)
			}
		case id > int64(len(pets)):
			if code := servertest.WantError(t, w, 0, ""); w.Code != http.StatusNotFound || code != httpapi.CodeNotFound {
				t.Fatalf("petId %q: %d %s, want 404 not_found", seg, w.Code, code)
			}
		default:
			if w.Code != http.StatusOK {
				t.Fatalf("petId %q: %d %s, want 200", seg, w.Code, w.Body)
			}
			testkit.WantJSON(t, w)
			if got := testkit.ReadPet(t, w.Body.Bytes()); got.ID != id || got.Name != pets[id-1].Name {
				t.Fatalf("petId %q: got %s, want pet %d", seg, w.Body, id)
			}
		}
	})
}

// getPetRouting routes as addRoutes does for getPet, to tell which paths
// net/http hands to getPet at all.
var getPetRouting = func() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(getPetPattern, http.NotFoundHandler())
	mux.Handle("/", http.NotFoundHandler())
	return mux
}()

const getPetPattern = "GET /v1/pets/{petId}"

// ---------------------------------------------------------------- auth

// FuzzAuthorizationHeader sends the input as the Authorization header of
// listPets: only "Bearer <the one active key>" (scheme in any case, one
// space or more, spaces around the key) is a 200; anything else is a 401
// with the right WWW-Authenticate challenge. The fake clock moves an hour
// per input, so the client-address limit never binds: a 429 is a failure.
// It also checks bearerToken against its own reading of the header, and
// keyProblem on a fresh key and on that key with one byte changed.
func FuzzAuthorizationHeader(f *testing.F) {
	for _, seed := range []struct {
		header string
		pos    uint8
		c      byte
	}{
		{"Bearer " + fuzzToken, 0, 'x'},
		{"bearer   " + fuzzToken + "  ", 9, 'A'},
		{"BEARER " + fuzzToken, 45, '0'},
		{"Bearer\t" + fuzzToken, 40, 'z'},
		{"Bearer " + fuzzToken + "x", 44, '_'},
		{"Bearer " + fuzzToken[:len(fuzzToken)-1], 3, '-'},
		{"Bearer " + fuzzToken + " extra", 20, ' '},
		{"Bearer " + fuzzRevokedToken, 8, '_'},
		{"Bearer " + fuzzUnknownToken, 9, '9'},
		{"Bearer " + fuzzStagingToken, 4, 't'},
		{"Basic dXNlcjpwYXNz", 1, 'a'},
		{"Bearer", 2, 'b'}, {"Bearer ", 7, 'c'}, {"Bearer    ", 10, 'd'}, {"", 11, 'e'}, {" Bearer " + fuzzToken, 12, 'f'},
		{"Bearer psk_live_", 13, 'g'}, {"Bearer psk_live_\x00\xff", 14, 0}, {"Bearer " + strings.Repeat("A", 300), 15, 0xff},
	} {
		f.Add(seed.header, seed.pos, seed.c)
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, header string, pos uint8, c byte) {
		// bearerToken, read again: the scheme alone, or the scheme, a space
		// and the credential, with the spaces around it dropped.
		isBearer := len(header) >= 6 && strings.ToLower(header[:6]) == "bearer" && (len(header) == 6 || header[6] == ' ')
		credential := ""
		if isBearer && len(header) > 6 {
			credential = strings.Trim(header[7:], " ")
		}
		if token, ok := httpapi.BearerToken(header); ok != isBearer || token != credential {
			t.Fatalf("bearerToken(%q) = %q, %v; want %q, %v", header, token, ok, credential, isBearer)
		}

		env := "production"
		if pos%2 == 1 {
			env = "staging"
		}
		key := domain.NewKeyToken(env)
		if problem := keyring.KeyProblem(key, env); problem.Reason != 0 {
			t.Fatalf("new key %q of %s: %s", key, env, problem.Message)
		}
		if keyring.KeyProblem(key, map[string]string{"production": "staging", "staging": "production"}[env]).Reason != keyring.WrongEnvironment {
			t.Fatalf("key %q of %s is not refused as the other environment's", key, env)
		}
		i := int(pos) % len(key)
		if changed := key[:i] + string([]byte{c}) + key[i+1:]; changed != key && keyring.KeyProblem(changed, env).Reason == 0 {
			t.Fatalf("key %q with byte %d changed to %q passes: %q", key, i, c, changed)
		}
		if keyring.KeyProblem(key[:i]+key[i+1:], env).Reason == 0 || keyring.KeyProblem(key[:i]+string([]byte{c})+key[i:], env).Reason == 0 {
			t.Fatalf("key %q with byte %d deleted, or %q inserted there, passes", key, i, c)
		}

		s.clock.Advance(time.Hour)
		req := httptest.NewRequest("GET", "/v1/pets?limit=1", nil)
		req.Header["Authorization"] = []string{header}
		w := s.send(t, s.handler, req)
		for _, name := range []string{"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "Ratelimit-Policy", "Ratelimit"} {
			if w.Header().Get(name) == "" {
				t.Errorf("Authorization %q: %d without %s", header, w.Code, name)
			}
		}
		if credential == fuzzToken {
			testkit.ReadPets(t, w)
			return
		}
		if code := servertest.WantError(t, w, 0, ""); w.Code != http.StatusUnauthorized || code != httpapi.CodeUnauthorized {
			t.Fatalf("Authorization %q: %d %s, want 401 unauthorized", header, w.Code, w.Body)
		}
		challenge := `Bearer realm="petstore"`
		if credential != "" {
			challenge += `, error="invalid_token"`
		}
		if got := w.Header().Values("WWW-Authenticate"); len(got) != 1 || got[0] != challenge {
			t.Fatalf("Authorization %q: WWW-Authenticate %q, want %q", header, got, challenge)
		}
	})
}

// ---------------------------------------------------------------- Idempotency-Key

// FuzzIdempotencyKey sends the input as the Idempotency-Key of a createPet
// (twice: the header given two times). A valid key, 1 to 255 printable
// ASCII characters bare or as a quoted structured-field string, is a 201;
// the same request again, with the key as sent or quoted, replays it (the
// same body, the same id), and another body with it is a 422 mismatch.
// Anything else is 400 invalid_request and creates nothing.
func FuzzIdempotencyKey(f *testing.F) {
	for _, seed := range []struct {
		value string
		twice bool
	}{
		{"a", false}, {"abc-123", false}, {`"abc-123"`, false}, {"abc-123", true}, {`"a\"b\\c"`, false},
		{`a"b`, false}, {`"`, false}, {`""`, false}, {`"a"b"`, false}, {`"a\b"`, false}, {`"a\"`, false},
		{"", false}, {" ", false}, {"tab\there", false}, {"ü", false}, {"\x7f", false},
		{strings.Repeat("k", 255), false}, {strings.Repeat("k", 256), false},
		{`"` + strings.Repeat("k", 255) + `"`, false}, {`"` + strings.Repeat(`\\`, 255) + `"`, false},
		{`"` + strings.Repeat(`\\`, 256) + `"`, false}, {`:YWJj:`, false},
	} {
		f.Add(seed.value, seed.twice)
	}
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, value string, twice bool) {
		h := http.Header{"Idempotency-Key": {value}}
		if twice {
			h["Idempotency-Key"] = append(h["Idempotency-Key"], value)
		}
		wantKey, wantOK := idempotencyKeyReference(value)
		wantOK = wantOK && !twice
		key, ok, err := publicapi.IdempotencyKey(h)
		if wantOK {
			if err != nil || !ok || key != wantKey {
				t.Fatalf("idempotencyKey(%q) = %q, %v, %v; want %q", h["Idempotency-Key"], key, ok, err, wantKey)
			}
		} else {
			var e *httpapi.Error
			if !errors.As(err, &e) || e.Code != httpapi.CodeInvalidRequest || ok {
				t.Fatalf("idempotencyKey(%q) = %q, %v, %v; want an invalid_request error", h["Idempotency-Key"], key, ok, err)
			}
		}

		const body = `{"name":"Idem","categoryId":1}`
		send := func(values []string, body string) *httptest.ResponseRecorder {
			req := fuzzRequest("POST", "/v1/pets", body)
			req.Header["Idempotency-Key"] = values
			return s.send(t, s.handler, req)
		}
		before := s.petCount(t)
		first := send(h["Idempotency-Key"], body)
		if !wantOK {
			if code := servertest.WantError(t, first, 0, ""); first.Code != http.StatusBadRequest || code != httpapi.CodeInvalidRequest {
				t.Fatalf("Idempotency-Key %q: %d %s, want 400 invalid_request", h["Idempotency-Key"], first.Code, first.Body)
			}
			if after := s.petCount(t); after != before {
				t.Fatalf("Idempotency-Key %q: refused, yet %d pets were created", h["Idempotency-Key"], after-before)
			}
			return
		}
		if first.Code != http.StatusCreated {
			t.Fatalf("Idempotency-Key %q: %d %s, want 201", value, first.Code, first.Body)
		}
		// The same key again, as it was sent and as a quoted sf-string:
		// the first answer replayed.
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		for _, v := range []string{value, quoted} {
			again := send([]string{v}, body)
			if again.Code != http.StatusCreated || again.Body.String() != first.Body.String() ||
				again.Header().Get("Location") != first.Header().Get("Location") {
				t.Fatalf("Idempotency-Key %q, then %q: replay answered %d %s, want the first answer 201 %s", value, v, again.Code, again.Body, first.Body)
			}
			if got := again.Header().Get("Idempotent-Replayed"); got != "true" {
				t.Errorf("Idempotency-Key %q, then %q: replay without Idempotent-Replayed: true (%q)", value, v, got)
			}
		}
		if after := s.petCount(t); after > before+1 {
			t.Fatalf("Idempotency-Key %q: %d pets created, want at most 1", value, after-before)
		}
		// The same key with another body is a mismatch.
		other := send([]string{value}, `{"name":"Other","categoryId":2}`)
		if code := servertest.WantError(t, other, 0, ""); other.Code != http.StatusUnprocessableEntity || code != httpapi.CodeIdempotencyMismatch {
			t.Fatalf("Idempotency-Key %q with another body: %d %s, want 422 idempotency_mismatch", value, other.Code, other.Body)
		}
	})
}

// idempotencyKeyReference reads an Idempotency-Key value as docs/api.md puts
// it: a value in double quotes is an RFC 8941 sf-string (DQUOTE *(chr) DQUOTE
// where chr is printable ASCII other than \ and ", or \" or \\), and the
// key is its content; any other value is the key itself. The key must be 1
// to 255 printable ASCII characters.
func idempotencyKeyReference(v string) (string, bool) {
	key := v
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var b []byte
		inner := v[1 : len(v)-1]
		for i := 0; i < len(inner); i++ {
			switch inner[i] {
			case '"':
				return "", false
			case '\\':
				if i+1 == len(inner) || (inner[i+1] != '"' && inner[i+1] != '\\') {
					return "", false
				}
				i++
			}
			b = append(b, inner[i])
		}
		key = string(b)
	}
	if len(key) < 1 || len(key) > 255 {
		return "", false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", false
		}
	}
	return key, true
}

// ---------------------------------------------------------------- JSON

// maxInt64Digits is the largest int64, written out.
const maxInt64Digits = "9223372036854775807"
