package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/servertest"
)

func TestEnterpriseFiguresAboveTheMaximumAreRefusedNamingTheField(t *testing.T) {
	over := strconv.Itoa(domain.MaxLimit + 1)
	s := servertest.Start(t, servertest.Options{})
	admin := s.MustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.MustCreate(s.KeyTerms("enterprise", domain.Limits{PerMinute: 100, PerDay: 1000}))
	path := "/admin/v1/keys/" + strconv.FormatInt(k.ID, 10)
	for _, c := range []struct{ method, target, body, field string }{
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":` + over + `,"perDay":5}`, "perMinute"},
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":5,"perDay":` + over + `}`, "perDay"},
		{"POST", "/admin/v1/keys", `{"plan":"enterprise","perMinute":9223372036854775807,"perDay":9223372036854775807}`, "perMinute"},
		{"PATCH", path, `{"perMinute":` + over + `}`, "perMinute"},
		{"PATCH", path, `{"perDay":` + over + `}`, "perDay"},
	} {
		servertest.WantError(t, s.Admin(c.method, c.target, admin, c.body), 400, httpapi.CodeInvalidRequest, c.field+" must be at most 1000000000")
	}
	at := strconv.Itoa(domain.MaxLimit)
	if w := s.Admin("POST", "/admin/v1/keys", admin, `{"plan":"enterprise","perMinute":`+at+`,"perDay":`+at+`}`); w.Code != 201 {
		t.Errorf("the maximum itself: HTTP status %d, want 201; body: %s", w.Code, w.Body)
	}

	db := filepath.Join(t.TempDir(), "keys.db")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", over, "--rpd", "5"}, 2, "--rpm must be at most 1000000000"},
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", "5", "--rpd", over}, 2, "--rpd must be at most 1000000000"},
		{[]string{"keys", "create", "--db", db, "--plan", "enterprise", "--rpm", at, "--rpd", at}, 0, ""},
		{[]string{"keys", "update", "--db", db, "1", "--rpm", over}, 2, "--rpm must be at most 1000000000"},
		{[]string{"keys", "update", "--db", db, "1", "--rpd", over}, 2, "--rpd must be at most 1000000000"},
	} {
		res := viaRun(t, nil, c.args...)
		if res.code != c.code || !strings.Contains(res.stderr, c.says) {
			t.Errorf("%s: exit status %d, %q; want %d saying %q", c.args[:2], res.code, res.stderr, c.code, c.says)
		}
	}
}
