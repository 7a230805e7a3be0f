package server

import (
	"fmt"
	"maps"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
)

// These tests keep admin-openapi.yaml and the admin API in agreement, as
// openapi_test.go does for openapi.yaml and /v1, with its machinery.

func readAdminOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	return readOpenAPIDocument(t, "admin-openapi.yaml", adminOpenAPIYAML)
}

// recordAdminRoutes is the admin API's table of routes.
func recordAdminRoutes() *apiRouteTable { return routeTable(adminRoutes(&App{})) }

func TestAdminOpenAPIDocumentsEveryRouteAndNoOtherOperation(t *testing.T) {
	t.Parallel()
	doc := readAdminOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi: %q, want 3.1.x", doc.OpenAPI)
	}
	documented := slices.Sorted(maps.Keys(doc.operations(t)))
	routed := routedOperations(t, recordAdminRoutes(), "/admin/v1/")
	if !slices.Equal(documented, routed) {
		t.Errorf("admin-openapi.yaml documents\n  %v\nthe admin API routes\n  %v", documented, routed)
	}
	for _, s := range doc.Servers {
		if !strings.HasSuffix(s.URL, "/admin/v1") {
			t.Errorf("server %q does not end in /admin/v1", s.URL)
		}
	}
}

func TestAdminOpenAPISecurityNamesTheScopeEachRouteNeeds(t *testing.T) {
	t.Parallel()
	doc := readAdminOpenAPI(t)
	ops := doc.operations(t)
	routes := recordAdminRoutes()
	if len(doc.Security) != 1 || doc.Security[0]["adminToken"] == nil {
		t.Errorf("global security = %v, want adminToken", doc.Security)
	}
	for _, pattern := range routes.patterns {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok || routes.access[pattern] == open {
			continue
		}
		op := ops[method+" /"+strings.TrimPrefix(path, "/admin/v1/")]
		if op.Security == nil || len(*op.Security) != 1 {
			t.Errorf("%s: security %v, want one requirement naming its scope", pattern, op.Security)
			continue
		}
		if got, want := (*op.Security)[0]["adminToken"], routes.scopes[pattern].Names(); !slices.Equal(got, want) {
			t.Errorf("%s: adminToken scopes %q, the server needs %q", op.OperationID, got, want)
		}
	}
	if op := ops["GET /openapi.yaml"]; op.Security == nil || len(*op.Security) != 0 {
		t.Errorf("getAdminOpenAPI: security %v, want none (no token needed)", op.Security)
	}
}

func TestAdminOpenAPIPathsAnswerOtherMethods405WithAllowListingTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	doc := readAdminOpenAPI(t)
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	k, _ := s.mustCreate(s.keyTerms("free"))
	for path, item := range doc.Paths {
		target := "/admin/v1" + strings.ReplaceAll(path, "{id}", strconv.FormatInt(k.ID, 10))
		// PUT: no admin path takes it (DELETE is a webhook endpoint's).
		wantAllowOfDocumentedMethods(t, path, item, s.admin("PUT", target, admin, ""))
	}
}

// petOnlyCodes are the codes the pet API gives and the admin API never does.
var petOnlyCodes = []string{httpapi.CodeIdempotencyConflict, httpapi.CodeIdempotencyMismatch, httpapi.CodeNotImplemented, httpapi.CodeHTTPSRequired}

// adminOnlyCodes are the codes only the admin API answers: openapi.yaml
// (the pet API) leaves them out, admin-openapi.yaml has them.
var adminOnlyCodes = []string{httpapi.CodeConflict, httpapi.CodeMisdirectedRequest, httpapi.CodeCrossOrigin}

func TestAdminOpenAPIErrorCodesAreThoseTheAdminAPIGives(t *testing.T) {
	t.Parallel()
	doc := readAdminOpenAPI(t)
	documented := slices.Sorted(slices.Values(doc.Components.Schemas["Error"].Properties["code"].Enum))
	want := slices.DeleteFunc(slices.Sorted(maps.Keys(httpapi.CodeStatus)), func(code string) bool { return slices.Contains(petOnlyCodes, code) })
	if !slices.Equal(documented, want) {
		t.Errorf("Error.code enum:\n  %v\nwant the codes of errors.go but the pet API's own:\n  %v", documented, want)
	}
	for _, code := range adminOnlyCodes {
		if !slices.Contains(documented, code) {
			t.Errorf("%s is an admin code, and admin-openapi.yaml leaves it out", code)
		}
	}
}

// adminOpenAPIStatuses are the statuses each operation can give, from the
// code: 421 from adminapi.RequireHost, for a Host not the listener's; 403
// from adminapi.SameOrigin, for a page of another origin; 401 and
// 429 from adminapi.Gate (the 429 once an address failed too often), 403 from
// its scope check, 405 from the path's catch-all, 500 for
// a failure or panic, 503 when the database is away; 400, 404, 409, 413 and
// 415 from the handler's own checks.
var adminOpenAPIStatuses = map[string][]int{
	"createKey":       {201, 400, 401, 403, 405, 409, 413, 415, 421, 429, 500, 503},
	"listKeys":        {200, 400, 401, 403, 405, 421, 429, 500, 503},
	"getKey":          {200, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"updateKey":       {200, 400, 401, 403, 404, 405, 409, 413, 415, 421, 429, 500, 503},
	"rollKey":         {201, 400, 401, 403, 404, 405, 413, 415, 421, 429, 500, 503},
	"revokeKey":       {200, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"getKeyUsage":     {200, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"getKeyLimits":    {200, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"whoami":          {200, 401, 403, 405, 421, 429, 500, 503},
	"listAuditEvents": {200, 400, 401, 403, 405, 421, 429, 500, 503},
	"getAdminOpenAPI": {200, 403, 405, 421, 500},
	"listBans":        {200, 401, 403, 405, 421, 429, 500, 503},
	"getBackup":       {200, 401, 403, 405, 421, 429, 500},
	"liftBan":         {204, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"listServers":     {200, 401, 403, 405, 421, 429, 500, 503},

	"listWebhooks":            {200, 401, 403, 405, 421, 429, 500, 503},
	"addWebhook":              {201, 400, 401, 403, 405, 413, 415, 421, 429, 500, 503},
	"removeWebhook":           {204, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"rotateWebhookSecret":     {200, 400, 401, 403, 404, 405, 413, 415, 421, 429, 500, 503},
	"enableWebhook":           {200, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"testWebhook":             {202, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"listWebhookDeliveries":   {200, 400, 401, 403, 404, 405, 421, 429, 500, 503},
	"resendWebhookDeliveries": {200, 400, 401, 403, 404, 405, 413, 415, 421, 429, 500, 503},
}

func TestAdminOpenAPIDocumentsEveryStatusEachOperationCanGive(t *testing.T) {
	t.Parallel()
	wantStatusesDocumented(t, readAdminOpenAPI(t), "admin-openapi.yaml", adminOpenAPIStatuses)
}

// TestAdminOpenAPIAgreesWithWhatTheServerAnswers sends a request for most
// documented responses and holds each answer to the document.
func TestAdminOpenAPIAgreesWithWhatTheServerAnswers(t *testing.T) {
	t.Parallel()
	doc := readAdminOpenAPI(t)
	s := newTestServer(t)
	admin := s.mustCreateAdmin("portal", domain.AllAdminScopes)
	reader := s.mustCreateAdmin("reader", domain.ScopeKeysRead)
	k, _ := s.mustCreate(s.keyTerms("free"))
	key := fmt.Sprintf("/admin/v1/keys/%d", k.ID)
	s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free","externalId":"taken"}`)
	s.admin("POST", "/admin/v1/keys", admin, `{"plan":"free"}`) // so that a page of one has a next
	banned, bannedKey := s.mustCreate(s.keyTerms("enterprise", banTerms))
	s.banOf(bannedKey, 20)
	s.flushAudit()
	ban := fmt.Sprintf("/admin/v1/bans/key:%d", banned.ID)

	tests := []struct {
		operation, method, target, token, body string
		want                                   int
	}{
		{"createKey", "POST", "/admin/v1/keys", admin, `{"plan":"pro"}`, 201},
		{"createKey", "POST", "/admin/v1/keys", admin, `{"plan":"gold"}`, 400},
		{"createKey", "POST", "/admin/v1/keys", "", `{"plan":"pro"}`, 401},
		{"createKey", "POST", "/admin/v1/keys", reader, `{"plan":"pro"}`, 403},
		{"createKey", "POST", "/admin/v1/keys", admin, `{"plan":"pro","externalId":"taken"}`, 409},
		{"createKey", "POST", "/admin/v1/keys", admin, `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, 413},
		{"listKeys", "GET", "/admin/v1/keys?limit=1", admin, "", 200},
		{"listKeys", "GET", "/admin/v1/keys?idle=never", admin, "", 400},
		{"listKeys", "DELETE", "/admin/v1/keys", admin, "", 405},
		{"getKey", "GET", key, reader, "", 200},
		{"getKey", "GET", "/admin/v1/keys/999", admin, "", 404},
		{"updateKey", "PATCH", key, admin, `{"plan":"pro"}`, 200},
		{"updateKey", "PATCH", key, reader, `{"plan":"pro"}`, 403},
		{"updateKey", "PATCH", key, admin, `{"externalId":"taken"}`, 409},
		{"getKeyUsage", "GET", key + "/usage?days=7", admin, "", 200},
		{"getKeyUsage", "GET", key + "/usage?days=0", admin, "", 400},
		{"getKeyLimits", "GET", key + "/limits", reader, "", 200},
		{"getKeyLimits", "GET", "/admin/v1/keys/999/limits", admin, "", 404},
		{"getKeyLimits", "GET", "/admin/v1/keys/x/limits", admin, "", 400},
		{"getKeyLimits", "GET", key + "/limits", "", "", 401},
		{"getKeyLimits", "GET", fmt.Sprintf("/admin/v1/keys/%d/limits", banned.ID), reader, "", 200},
		{"getKey", "GET", fmt.Sprintf("/admin/v1/keys/%d", banned.ID), reader, "", 200},
		{"listAuditEvents", "GET", "/admin/v1/audit?order=newest&limit=1", admin, "", 200},
		{"listAuditEvents", "GET", "/admin/v1/audit?order=sideways", admin, "", 400},
		{"whoami", "GET", "/admin/v1/whoami", reader, "", 200},
		{"whoami", "GET", "/admin/v1/whoami", "", "", 401},
		{"whoami", "POST", "/admin/v1/whoami", reader, "", 405},
		{"listKeys", "GET", "/admin/v1/keys?q=", admin, "", 400},
		{"listAuditEvents", "GET", "/admin/v1/audit?limit=1", admin, "", 200},
		{"listAuditEvents", "GET", "/admin/v1/audit", reader, "", 403},
		{"rollKey", "POST", key + "/roll", admin, "", 201},
		{"rollKey", "POST", key + "/roll", admin, "", 400},
		{"revokeKey", "POST", key + "/revoke", admin, "", 200},
		{"revokeKey", "POST", "/admin/v1/keys/999/revoke", admin, "", 404},
		{"addWebhook", "POST", "/admin/v1/webhooks", admin, `{"url":"https://203.0.113.10/in"}`, 201},
		{"addWebhook", "POST", "/admin/v1/webhooks", admin, `{"url":"ftp://203.0.113.10/"}`, 400},
		{"listWebhooks", "GET", "/admin/v1/webhooks", admin, "", 200},
		{"testWebhook", "POST", "/admin/v1/webhooks/1/test", admin, "", 202},
		{"listWebhookDeliveries", "GET", "/admin/v1/webhooks/1/deliveries", admin, "", 200},
		{"resendWebhookDeliveries", "POST", "/admin/v1/webhooks/1/resend", admin, `{"failed":true}`, 200},
		{"resendWebhookDeliveries", "POST", "/admin/v1/webhooks/1/resend", admin, `{}`, 400},
		{"rotateWebhookSecret", "POST", "/admin/v1/webhooks/1/rotate", admin, "", 200},
		{"enableWebhook", "POST", "/admin/v1/webhooks/1/enable", admin, "", 200},
		{"removeWebhook", "DELETE", "/admin/v1/webhooks/1", admin, "", 204},
		{"removeWebhook", "DELETE", "/admin/v1/webhooks/1", admin, "", 404},
		{"listBans", "GET", "/admin/v1/bans", reader, "", 200},
		{"getBackup", "GET", "/admin/v1/backup", reader, "", 200},
		{"getBackup", "GET", "/admin/v1/backup", "", "", 401},
		{"getBackup", "POST", "/admin/v1/backup", reader, "", 405},
		{"listBans", "POST", "/admin/v1/bans", admin, "", 405},
		{"listServers", "GET", "/admin/v1/servers", reader, "", 200},
		{"liftBan", "DELETE", ban, reader, "", 403},
		{"liftBan", "DELETE", ban, admin, "", 204},
		{"liftBan", "DELETE", ban, admin, "", 404},
		{"liftBan", "DELETE", "/admin/v1/bans/key:x", admin, "", 400},
		{"getAdminOpenAPI", "GET", "/admin/v1/openapi.yaml", "", "", 200},
		{"getAdminOpenAPI", "POST", "/admin/v1/openapi.yaml", "", "", 405},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.operation, tt.want), func(t *testing.T) {
			w := s.admin(tt.method, tt.target, tt.token, tt.body)
			if w.Code != tt.want {
				t.Fatalf("%s %s: HTTP status %d, want %d; body: %.200s", tt.method, tt.target, w.Code, tt.want, w.Body)
			}
			doc.checkAnswer(t, tt.operation, w)
		})
	}
	t.Run("unsupported media type", func(t *testing.T) {
		w := s.admin("POST", "/admin/v1/keys", admin, `{"plan":"pro"}`, "Content-Type", "text/plain")
		if w.Code != 415 {
			t.Fatalf("HTTP status %d", w.Code)
		}
		doc.checkAnswer(t, "createKey", w)
	})
	t.Run("too many failures", func(t *testing.T) {
		var w *httptest.ResponseRecorder
		for range domain.AnonymousLimits.PerMinute + 1 {
			w = s.admin("GET", "/admin/v1/keys", "psk_nothing", "")
		}
		if w.Code != 429 {
			t.Fatalf("HTTP status %d", w.Code)
		}
		doc.checkAnswer(t, "listKeys", w)
	})
}
