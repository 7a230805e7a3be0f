package server

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"petstore/internal/domain"
	"petstore/internal/httpapi"
	"petstore/internal/publicapi"

	"gopkg.in/yaml.v3"
)

// These tests keep openapi.yaml and the code in agreement: the routes, the
// error codes, the limits, the statuses and headers each operation can give,
// and the deprecation dates. When one of them fails, change the document or
// the code so that they say the same thing again.

// openAPIDoc is the part of an OpenAPI document these tests read.
type openAPIDoc struct {
	OpenAPI  string                          `yaml:"openapi"`
	Servers  []openAPIServer                 `yaml:"servers"`
	Security []map[string][]string           `yaml:"security"`
	Paths    map[string]map[string]yaml.Node `yaml:"paths"`

	Components struct {
		Schemas         map[string]openAPISchema    `yaml:"schemas"`
		Parameters      map[string]openAPIParameter `yaml:"parameters"`
		Headers         map[string]openAPIHeader    `yaml:"headers"`
		Responses       map[string]openAPIResponse  `yaml:"responses"`
		SecuritySchemes map[string]struct {
			Type   string `yaml:"type"`
			Scheme string `yaml:"scheme"`
		} `yaml:"securitySchemes"`
	} `yaml:"components"`
}

type openAPIServer struct {
	URL       string `yaml:"url"`
	Variables map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"variables"`
}

type openAPIOperation struct {
	OperationID string                     `yaml:"operationId"`
	Deprecated  bool                       `yaml:"deprecated"`
	Stability   string                     `yaml:"x-stability"`
	Security    *[]map[string][]string     `yaml:"security"`
	Parameters  []openAPIParameter         `yaml:"parameters"`
	RequestBody yaml.Node                  `yaml:"requestBody"`
	Responses   map[string]openAPIResponse `yaml:"responses"`
}

type openAPIParameter struct {
	Ref      string        `yaml:"$ref"`
	Name     string        `yaml:"name"`
	In       string        `yaml:"in"`
	Required bool          `yaml:"required"`
	Schema   openAPISchema `yaml:"schema"`
}

type openAPIHeader struct {
	Ref      string        `yaml:"$ref"`
	Required bool          `yaml:"required"`
	Schema   openAPISchema `yaml:"schema"`
}

type openAPIResponse struct {
	Ref     string                   `yaml:"$ref"`
	Headers map[string]openAPIHeader `yaml:"headers"`
	Content map[string]struct {
		Schema openAPISchema `yaml:"schema"`
	} `yaml:"content"`
}

type openAPISchema struct {
	Ref                  string                   `yaml:"$ref"`
	Type                 openAPIType              `yaml:"type"`
	Format               string                   `yaml:"format"`
	Enum                 []string                 `yaml:"enum"`
	Const                string                   `yaml:"const"`
	Minimum              *int64                   `yaml:"minimum"`
	Maximum              *int64                   `yaml:"maximum"`
	Default              any                      `yaml:"default"`
	MinLength            *int                     `yaml:"minLength"`
	MaxLength            *int                     `yaml:"maxLength"`
	Required             []string                 `yaml:"required"`
	AdditionalProperties *bool                    `yaml:"additionalProperties"`
	Properties           map[string]openAPISchema `yaml:"properties"`
	Items                *openAPISchema           `yaml:"items"`
}

// openAPIType is a schema's type: one name, or as OpenAPI 3.1 allows a
// list of them (["string", "null"]), kept joined by commas.
type openAPIType string

func (t *openAPIType) UnmarshalYAML(n *yaml.Node) error {
	var names []string
	if n.Kind == yaml.SequenceNode {
		if err := n.Decode(&names); err != nil {
			return err
		}
	} else {
		names = []string{n.Value}
	}
	*t = openAPIType(strings.Join(names, ","))
	return nil
}

// String describes a schema's type and bounds, for test messages.
func (s openAPISchema) String() string {
	if s.Ref != "" {
		return "$ref " + s.Ref
	}
	b := []string{string(s.Type)}
	if s.Format != "" {
		b = append(b, s.Format)
	}
	if s.Minimum != nil {
		b = append(b, fmt.Sprintf("minimum=%d", *s.Minimum))
	}
	if s.Maximum != nil {
		b = append(b, fmt.Sprintf("maximum=%d", *s.Maximum))
	}
	if s.Default != nil {
		b = append(b, fmt.Sprintf("default=%v", s.Default))
	}
	if s.MinLength != nil {
		b = append(b, fmt.Sprintf("minLength=%d", *s.MinLength))
	}
	if s.MaxLength != nil {
		b = append(b, fmt.Sprintf("maxLength=%d", *s.MaxLength))
	}
	return strings.Join(b, " ")
}

// openAPIMethods are the path item keys that are operations.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func readOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	return readOpenAPIDocument(t, "openapi.yaml", openapiYAML)
}

// readOpenAPIDocument reads the OpenAPI document data, called name.
func readOpenAPIDocument(t *testing.T, name string, data []byte) *openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s does not parse: %v", name, err)
	}
	return &doc
}

// operations returns the document's operations by "METHOD /path", the path
// relative to the /v1 server.
func (d *openAPIDoc) operations(t *testing.T) map[string]openAPIOperation {
	t.Helper()
	ops := make(map[string]openAPIOperation)
	for path, item := range d.Paths {
		for key, node := range item {
			if !slices.Contains(openAPIMethods, key) {
				continue
			}
			var op openAPIOperation
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: %v", key, path, err)
			}
			ops[strings.ToUpper(key)+" "+path] = op
		}
	}
	return ops
}

// operation returns the operation with the given operationId.
func (d *openAPIDoc) operation(t *testing.T, id string) openAPIOperation {
	t.Helper()
	for _, op := range d.operations(t) {
		if op.OperationID == id {
			return op
		}
	}
	t.Fatalf("openapi.yaml has no operation %s", id)
	return openAPIOperation{}
}

// openAPIRefName returns the name in a "#/components/<kind>/<name>" reference.
func openAPIRefName(t *testing.T, ref, kind string) string {
	t.Helper()
	name, ok := strings.CutPrefix(ref, "#/components/"+kind+"/")
	if !ok {
		t.Fatalf("$ref %q is not to #/components/%s", ref, kind)
	}
	return name
}

// resolve follows v's $refs through the components of kind until one is
// the thing itself.
func resolve[T any](t *testing.T, v T, ref func(T) string, kind string, components map[string]T) T {
	t.Helper()
	for ref(v) != "" {
		name := openAPIRefName(t, ref(v), kind)
		next, ok := components[name]
		if !ok {
			t.Fatalf("no %s component %s", strings.TrimSuffix(kind, "s"), name)
		}
		v = next
	}
	return v
}

func (d *openAPIDoc) response(t *testing.T, r openAPIResponse) openAPIResponse {
	return resolve(t, r, func(r openAPIResponse) string { return r.Ref }, "responses", d.Components.Responses)
}

func (d *openAPIDoc) header(t *testing.T, h openAPIHeader) openAPIHeader {
	return resolve(t, h, func(h openAPIHeader) string { return h.Ref }, "headers", d.Components.Headers)
}

func (d *openAPIDoc) parameter(t *testing.T, p openAPIParameter) openAPIParameter {
	return resolve(t, p, func(p openAPIParameter) string { return p.Ref }, "parameters", d.Components.Parameters)
}

func (d *openAPIDoc) schema(t *testing.T, s openAPISchema) openAPISchema {
	return resolve(t, s, func(s openAPISchema) string { return s.Ref }, "schemas", d.Components.Schemas)
}

// operationParameter returns the named parameter of an operation.
func (d *openAPIDoc) operationParameter(t *testing.T, op openAPIOperation, name string) openAPIParameter {
	t.Helper()
	for _, p := range op.Parameters {
		if p = d.parameter(t, p); p.Name == name {
			return p
		}
	}
	t.Fatalf("%s has no parameter %s", op.OperationID, name)
	return openAPIParameter{}
}

// apiRouteTable is apiRoutes as data: the patterns in order, and each
// one's handler (unwrapped: no key, no limit), scope and way in.
type apiRouteTable struct {
	patterns []string
	handlers map[string]http.Handler
	scopes   map[string]domain.ScopeSet
	access   map[string]access
}

func recordRoutes() *apiRouteTable { return routeTable(apiRoutes(&App{})) }

// routeTable is routes by pattern.
func routeTable(routes []route) *apiRouteTable {
	r := &apiRouteTable{handlers: make(map[string]http.Handler), scopes: make(map[string]domain.ScopeSet), access: make(map[string]access)}
	for _, rt := range routes {
		r.patterns = append(r.patterns, rt.pattern)
		r.handlers[rt.pattern] = rt.handler
		r.scopes[rt.pattern] = rt.need
		r.access[rt.pattern] = rt.access
	}
	return r
}

// codeOperations returns the routes with a real handler, "METHOD /path"
// relative to /v1: every pattern with a method. The method-less patterns are
// the 405 and 404 catch-alls.
func codeOperations(t *testing.T) []string {
	t.Helper()
	return routedOperations(t, recordRoutes(), "/v1/")
}

// routedOperations are the routes of table with a real handler, "METHOD
// /path" relative to base.
func routedOperations(t *testing.T, table *apiRouteTable, base string) []string {
	t.Helper()
	var ops []string
	for _, pattern := range table.patterns {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			continue
		}
		rel, ok := strings.CutPrefix(path, base)
		if !ok {
			t.Fatalf("route %q is not under %s", pattern, base)
		}
		ops = append(ops, method+" /"+rel)
	}
	sort.Strings(ops)
	return ops
}

func TestOpenAPIIsVersion31AndEveryServerEndsInV1(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi: %q, want 3.1.x", doc.OpenAPI)
	}
	if len(doc.Servers) < 2 {
		t.Errorf("%d servers, want production and staging", len(doc.Servers))
	}
	for _, s := range doc.Servers {
		url := s.URL
		for name, v := range s.Variables {
			url = strings.ReplaceAll(url, "{"+name+"}", v.Default)
		}
		if !strings.HasSuffix(url, "/v1") || strings.Contains(url, "{") {
			t.Errorf("server %q (with its defaults %q) does not end in /v1: the document's paths are relative to /v1", s.URL, url)
		}
	}
}

func TestOpenAPIDocumentsEveryRouteAndNoOtherOperation(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	documented := slices.Sorted(maps.Keys(doc.operations(t)))
	routed := codeOperations(t)
	for _, op := range routed {
		if !slices.Contains(documented, op) {
			t.Errorf("the server routes %s, and openapi.yaml has no such operation", op)
		}
	}
	for _, op := range documented {
		if !slices.Contains(routed, op) {
			t.Errorf("openapi.yaml documents %s, and the server has no handler for it", op)
		}
	}
	wantIDs := map[string]string{
		"GET /pets":         "listPets",
		"POST /pets":        "createPet",
		"GET /pets/{petId}": "getPet",
		"GET /store/orders": "listStoreOrders",
		"GET /openapi.yaml": "getOpenAPI",
		"GET /rate_limit":   "getRateLimit",
	}
	for key, op := range doc.operations(t) {
		if want, ok := wantIDs[key]; ok && op.OperationID != want {
			t.Errorf("%s: operationId %q, want %q", key, op.OperationID, want)
		}
	}
}

func TestOpenAPIPathsAnswerOtherMethods405WithAllowListingTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	routes := recordRoutes()
	for path, item := range doc.Paths {
		catchAll, ok := routes.handlers["/v1"+path]
		if !ok {
			t.Errorf("%s: no 405 catch-all registered for /v1%s", path, path)
			continue
		}
		w := httptest.NewRecorder()
		catchAll.ServeHTTP(w, httptest.NewRequest("DELETE", "/v1"+path, nil))
		wantAllowOfDocumentedMethods(t, path, item, w)
	}
}

// wantAllowOfDocumentedMethods checks that w, the answer to a method path
// does not document, is a 405 whose Allow lists the methods item documents
// (and HEAD with GET, which a GET pattern answers too).
func wantAllowOfDocumentedMethods(t *testing.T, path string, item map[string]yaml.Node, w *httptest.ResponseRecorder) {
	t.Helper()
	var want []string
	for key := range item {
		if slices.Contains(openAPIMethods, key) {
			want = append(want, strings.ToUpper(key))
		}
	}
	if slices.Contains(want, "GET") && !slices.Contains(want, "HEAD") {
		want = append(want, "HEAD") // a GET pattern answers HEAD too
	}
	sort.Strings(want)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("%s: another method answered %d, want 405", path, w.Code)
		return
	}
	var allow []string
	for m := range strings.SplitSeq(w.Header().Get("Allow"), ",") {
		allow = append(allow, strings.TrimSpace(m))
	}
	sort.Strings(allow)
	if !slices.Equal(allow, want) {
		t.Errorf("%s: Allow: %v, want the documented methods %v", path, allow, want)
	}
}

func TestOpenAPIErrorCodesAreExactlyThoseOfErrorsGo(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	errSchema, ok := doc.Components.Schemas["Error"]
	if !ok {
		t.Fatal("openapi.yaml has no Error schema")
	}
	documented := slices.Sorted(slices.Values(doc.schema(t, errSchema.Properties["code"]).Enum))
	inCode := slices.DeleteFunc(slices.Sorted(maps.Keys(httpapi.CodeStatus)), func(code string) bool { return slices.Contains(adminOnlyCodes, code) })
	if !slices.Equal(documented, inCode) {
		t.Errorf("Error.code enum:\n  %v\nwant the keys of codeStatus but adminOnlyCodes:\n  %v", documented, inCode)
	}
	if want := []string{"code", "message", "status"}; !slices.Equal(slices.Sorted(slices.Values(errSchema.Required)), want) {
		t.Errorf("Error requires %v, want %v", errSchema.Required, want)
	}
}

func TestOpenAPIGetPetIsDeprecatedWithTheDatesTheServerSends(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	getPet := doc.operation(t, "getPet")
	if !getPet.Deprecated {
		t.Error("getPet is not deprecated: true")
	}
	for id, op := range map[string]openAPIOperation{
		"listPets": doc.operation(t, "listPets"), "createPet": doc.operation(t, "createPet"),
		"listStoreOrders": doc.operation(t, "listStoreOrders"), "getOpenAPI": doc.operation(t, "getOpenAPI"),
		"getRateLimit": doc.operation(t, "getRateLimit"),
	} {
		if op.Deprecated {
			t.Errorf("%s is deprecated: true; only getPet is", id)
		}
	}

	deprecatedSince, sunset := publicapi.Deprecation()
	want := map[string]string{
		"Deprecation": "@" + strconv.FormatInt(deprecatedSince.Unix(), 10),
		"Sunset":      sunset.Format(http.TimeFormat),
		"Link":        `</v1/pets>; rel="successor-version"`,
	}
	for _, status := range []string{"200", "400", "404"} {
		r, ok := getPet.Responses[status]
		if !ok {
			t.Errorf("getPet has no %s response", status)
			continue
		}
		r = doc.response(t, r)
		for name, value := range want {
			h, ok := r.Headers[name]
			if !ok {
				t.Errorf("getPet %s: no %s header", status, name)
				continue
			}
			if h = doc.header(t, h); h.Schema.Const != value || !h.Required {
				t.Errorf("getPet %s: %s is const %q (required %v), want const %q, required", status, name, h.Schema.Const, h.Required, value)
			}
		}
	}

	// And the server sends those very values.
	s := newTestServer(t)
	w := s.do("GET", "/v1/pets/1", s.mustCreateKey("free"), "")
	for name, value := range want {
		if got := w.Header().Get(name); got != value {
			t.Errorf("GET /v1/pets/1 sends %s: %q, want %q", name, got, value)
		}
	}
}

func TestOpenAPIEveryOperationHasAStabilityMarker(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	for key, op := range doc.operations(t) {
		switch op.Stability {
		case "stable", "beta", "experimental":
		default:
			t.Errorf("%s (%s): x-stability %q, want stable, beta or experimental", key, op.OperationID, op.Stability)
		}
	}
	if got := doc.operation(t, "listStoreOrders").Stability; got != "experimental" {
		t.Errorf("listStoreOrders: x-stability %q, want experimental: it is not implemented", got)
	}
}

func TestOpenAPIEveryOperationButTheDocumentNeedsABearerKey(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	scheme, ok := doc.Components.SecuritySchemes["bearerAuth"]
	if !ok || scheme.Type != "http" || scheme.Scheme != "bearer" {
		t.Errorf("securitySchemes.bearerAuth = %+v, want type http, scheme bearer", scheme)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("global security = %v, want bearerAuth", doc.Security)
	}
	routes := recordRoutes()
	for key, op := range doc.operations(t) {
		public := op.Security != nil && len(*op.Security) == 0
		method, path, _ := strings.Cut(key, " ")
		if wantPublic := routes.access[method+" /v1"+path] == keyless; public != wantPublic {
			t.Errorf("%s: needs no key = %v, want %v", key, public, wantPublic)
		}
	}
}

func TestOpenAPISecurityNamesTheScopeEachRouteNeeds(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	ops := doc.operations(t)
	routes := recordRoutes()
	for _, pattern := range routes.patterns {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok || routes.access[pattern] == keyless {
			continue // the 405 and 404 catch-alls: any valid key; the keyless document: the test above
		}
		key := method + " /" + strings.TrimPrefix(path, "/v1/")
		op, ok := ops[key]
		if !ok {
			continue // TestOpenAPIDocumentsEveryRouteAndNoOtherOperation says so
		}
		if op.Security == nil || len(*op.Security) != 1 {
			t.Errorf("%s: security %v, want one requirement of its own naming its scope", op.OperationID, op.Security)
			continue
		}
		scopes, ok := (*op.Security)[0]["bearerAuth"]
		if !ok {
			t.Errorf("%s: security %v, want bearerAuth", op.OperationID, *op.Security)
			continue
		}
		if want := routes.scopes[pattern].Names(); !slices.Equal(scopes, want) {
			t.Errorf("%s: bearerAuth scopes %q, the server needs %q", op.OperationID, scopes, want)
		}
	}
	items := doc.Components.Schemas["RateLimitStatus"].Properties["scopes"].Items
	if want := domain.AllScopes.Names(); items == nil || !slices.Equal(items.Enum, want) {
		t.Errorf("RateLimitStatus.scopes items %v, want an enum of every scope %q", items, want)
	}
}

// openAPIStatuses are the statuses each operation can give, from the code:
// 401 from publicapi.RequireKey (not on the keyless document), 403 from RequireScope
// (on the operations that need a scope), 405 from the path's
// catch-all for other methods, 429 from Limit, 500 for any unexpected failure
// or panic, 503 when SQLite is unavailable (storeError, also while looking up
// the key or its daily usage), and the handler's own.
var openAPIStatuses = map[string][]int{
	// publicapi.ListPets: 400 from parseListQuery.
	"listPets": {200, 400, 401, 403, 405, 429, 500, 503},
	// CreatePet: 400 from idempotencyKey and decodeNewPet (invalid_request,
	// invalid_json), 413 and 415 from decodeNewPet, 409 and 422 from createOnce.
	"createPet": {201, 400, 401, 403, 405, 409, 413, 415, 422, 429, 500, 503},
	// GetPet: 400 from parseID, 404 from the store.
	"getPet": {200, 400, 401, 403, 404, 405, 429, 500, 503},
	// NotImplemented.
	"listStoreOrders": {401, 405, 429, 500, 501, 503},
	// RateLimit: 429 only during a ban (from limit without a key).
	"getRateLimit": {200, 401, 403, 405, 429, 500, 503},
	// GET /v1/openapi.yaml: no key needed, so no 401.
	"getOpenAPI": {200, 405, 429, 500, 503},
}

func TestOpenAPIDocumentsEveryStatusEachOperationCanGive(t *testing.T) {
	t.Parallel()
	wantStatusesDocumented(t, readOpenAPI(t), "openapi.yaml", openAPIStatuses)
}

// wantStatusesDocumented holds each operation of doc (called name) to the
// statuses the code can give, by operationId in statuses: each documented,
// and no other.
func wantStatusesDocumented(t *testing.T, doc *openAPIDoc, name string, statuses map[string][]int) {
	t.Helper()
	for key, op := range doc.operations(t) {
		want, ok := statuses[op.OperationID]
		if !ok {
			t.Errorf("%s: operation %q is not in the table of statuses in this test", key, op.OperationID)
			continue
		}
		var documented []int
		for status := range op.Responses {
			if status == "default" {
				continue
			}
			n, err := strconv.Atoi(status)
			if err != nil {
				t.Errorf("%s: response %q is not a status code", op.OperationID, status)
				continue
			}
			documented = append(documented, n)
		}
		sort.Ints(documented)
		for _, n := range want {
			if !slices.Contains(documented, n) {
				t.Errorf("%s can answer %d, and %s does not document it", op.OperationID, n, name)
			}
		}
		for _, n := range documented {
			if !slices.Contains(want, n) {
				t.Errorf("%s documents %d for %s, which the code never answers", name, n, op.OperationID)
			}
		}
	}
}

func TestOpenAPIResponsesDocumentTheirHeadersAndErrorShape(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	everywhere := []string{"X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"}
	byStatus := map[string][]string{
		"401": {"WWW-Authenticate"},
		"403": {"WWW-Authenticate"},
		"405": {"Allow"},
		"429": {"Retry-After"},
		"503": {"Retry-After"},
	}
	byOperation := map[string][]string{
		"listPets 200":  {"Link"},
		"createPet 201": {"Location", "Idempotent-Replayed"},
		"getPet 200":    {"Deprecation", "Sunset", "Link"},
		"getPet 400":    {"Deprecation", "Sunset", "Link"},
		"getPet 404":    {"Deprecation", "Sunset", "Link"},
	}
	for _, op := range doc.operations(t) {
		for status, r := range op.Responses {
			if status == "default" {
				continue
			}
			r = doc.response(t, r)
			want := slices.Concat(everywhere, byStatus[status], byOperation[op.OperationID+" "+status])
			for _, name := range want {
				if _, ok := r.Headers[name]; !ok {
					t.Errorf("%s %s: header %s is not documented", op.OperationID, status, name)
				}
			}
			if status[0] == '4' || status[0] == '5' {
				media, ok := r.Content["application/json"]
				if !ok || media.Schema.Ref != "#/components/schemas/Error" {
					t.Errorf("%s %s: body is not application/json Error", op.OperationID, status)
				}
			}
		}
	}
}

func TestOpenAPIParametersAndBodyHaveTheCodesBounds(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	list := doc.operation(t, "listPets")

	limit := doc.operationParameter(t, list, "limit")
	if s := limit.Schema; s.Type != "integer" || s.Minimum == nil || *s.Minimum != 1 ||
		s.Maximum == nil || *s.Maximum != httpapi.MaxPageSize || s.Default != httpapi.DefaultPageSize {
		t.Errorf("limit schema is %s, want integer minimum=1 maximum=%d default=%d", s, httpapi.MaxPageSize, httpapi.DefaultPageSize)
	}

	status := doc.schema(t, doc.operationParameter(t, list, "status").Schema)
	for _, v := range status.Enum {
		if !domain.KnownStatus(v) {
			t.Errorf("status enum has %q, which the server refuses", v)
		}
	}
	if want := []string{"available", "pending", "sold"}; !slices.Equal(status.Enum, want) {
		t.Errorf("status enum = %v, want %v", status.Enum, want)
	}

	if cursor := doc.operationParameter(t, list, "cursor"); cursor.In != "query" || cursor.Schema.Type != "string" {
		t.Errorf("cursor is in %s, %s; want a query string", cursor.In, cursor.Schema)
	}

	petID := doc.operationParameter(t, doc.operation(t, "getPet"), "petId")
	if s := petID.Schema; petID.In != "path" || !petID.Required || s.Type != "integer" || s.Format != "int64" ||
		s.Minimum == nil || *s.Minimum != 1 {
		t.Errorf("petId is in %s (required %v), %s; want a required path integer int64 minimum=1", petID.In, petID.Required, petID.Schema)
	}

	key := doc.operationParameter(t, doc.operation(t, "createPet"), "Idempotency-Key")
	if s := key.Schema; key.In != "header" || key.Required || s.MinLength == nil || *s.MinLength != 1 ||
		s.MaxLength == nil || *s.MaxLength != publicapi.MaxIdempotencyKeyLen {
		t.Errorf("Idempotency-Key is in %s (required %v), %s; want an optional header string minLength=1 maxLength=%d", key.In, key.Required, key.Schema, publicapi.MaxIdempotencyKeyLen)
	}

	newPet := doc.Components.Schemas["NewPet"]
	if newPet.AdditionalProperties == nil || *newPet.AdditionalProperties {
		t.Error("NewPet does not have additionalProperties: false; the server refuses unknown fields")
	}
	if want := []string{"categoryId", "name"}; !slices.Equal(slices.Sorted(slices.Values(newPet.Required)), want) {
		t.Errorf("NewPet requires %v, want %v", newPet.Required, want)
	}
	if name := newPet.Properties["name"]; name.MinLength == nil || *name.MinLength != 1 ||
		name.MaxLength == nil || *name.MaxLength != httpapi.MaxNameRunes {
		t.Errorf("NewPet.name is %s, want string minLength=1 maxLength=%d", name, httpapi.MaxNameRunes)
	}
	if c := newPet.Properties["categoryId"]; c.Type != "integer" || c.Format != "int64" || c.Minimum == nil || *c.Minimum != 1 {
		t.Errorf("NewPet.categoryId is %s, want integer int64 minimum=1", c)
	}
	if s := newPet.Properties["status"]; s.Ref != "#/components/schemas/PetStatus" {
		t.Errorf("NewPet.status is %s, want $ref PetStatus", s)
	}
	pet := doc.Components.Schemas["Pet"]
	if want := []string{"categoryId", "id", "name"}; !slices.Equal(slices.Sorted(slices.Values(pet.Required)), want) {
		t.Errorf("Pet requires %v, want %v (status is absent when none was given)", pet.Required, want)
	}
}

// TestOpenAPIAgreesWithWhatTheServerAnswers sends one request for most
// documented responses and checks that the document lists its status for the
// operation and every header the server sent that the document knows of.
func TestOpenAPIAgreesWithWhatTheServerAnswers(t *testing.T) {
	t.Parallel()
	doc := readOpenAPI(t)
	s := newTestServer(t)
	key := s.mustCreateKey("free")
	w := s.do("POST", "/v1/pets", key, `{"name":"Rex","categoryId":1}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("create a pet: HTTP status %d; body: %s", w.Code, w.Body)
	}
	petPath := w.Header().Get("Location")
	s.do("POST", "/v1/pets", key, `{"name":"Bella","categoryId":1,"status":"sold"}`) // so that a page of one has a next
	readOnly, writeOnly := s.keyTerms("free"), s.keyTerms("free")
	readOnly.Scopes, writeOnly.Scopes = domain.ScopePetsRead, domain.ScopePetsWrite
	_, readKey := s.mustCreate(readOnly)
	_, writeKey := s.mustCreate(writeOnly)
	tight := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 100})
	s.do("GET", "/v1/pets", tight, "")
	banned := s.mustCreateKey("enterprise", domain.Limits{PerMinute: 1, PerDay: 100})
	for range 13 {
		s.do("GET", "/v1/pets", banned, "")
	}

	tests := []struct {
		name      string
		operation string
		method    string
		target    string
		key       string
		body      string
		header    []string
		want      int
	}{
		{"a page of pets with a next", "listPets", "GET", "/v1/pets?limit=1", key, "", nil, 200},
		{"a bad limit", "listPets", "GET", "/v1/pets?limit=0", key, "", nil, 400},
		{"no key", "listPets", "GET", "/v1/pets", "", "", nil, 401},
		{"another method on the path", "listPets", "DELETE", "/v1/pets", key, "", nil, 405},
		{"over the limit", "listPets", "GET", "/v1/pets", tight, "", nil, 429},
		{"a key without pets:read", "listPets", "GET", "/v1/pets", writeKey, "", nil, 403},
		{"a key without pets:write", "createPet", "POST", "/v1/pets", readKey, `{"name":"Tom","categoryId":2}`, nil, 403},
		{"a pet with a key without pets:read", "getPet", "GET", petPath, writeKey, "", nil, 403},
		{"the rate limits of a key without pets:read", "getRateLimit", "GET", "/v1/rate_limit", writeKey, "", nil, 403},
		{"store orders with a read-only key", "listStoreOrders", "GET", "/v1/store/orders", readKey, "", nil, 501},
		{"a created pet", "createPet", "POST", "/v1/pets", key, `{"name":"Tom","categoryId":2}`, []string{"Idempotency-Key", "k1"}, 201},
		{"a replayed creation", "createPet", "POST", "/v1/pets", key, `{"name":"Tom","categoryId":2}`, []string{"Idempotency-Key", "k1"}, 201},
		{"a reused Idempotency-Key", "createPet", "POST", "/v1/pets", key, `{"name":"Max","categoryId":2}`, []string{"Idempotency-Key", "k1"}, 422},
		{"a body that is not JSON", "createPet", "POST", "/v1/pets", key, `{`, nil, 400},
		{"a body too large", "createPet", "POST", "/v1/pets", key, `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, nil, 413},
		{"a body of another type", "createPet", "POST", "/v1/pets", key, `{}`, []string{"Content-Type", "text/plain"}, 415},
		{"a pet", "getPet", "GET", petPath, key, "", nil, 200},
		{"a bad petId", "getPet", "GET", "/v1/pets/0", key, "", nil, 400},
		{"an unknown pet", "getPet", "GET", "/v1/pets/999", key, "", nil, 404},
		{"store orders", "listStoreOrders", "GET", "/v1/store/orders", key, "", nil, 501},
		{"store orders without a key", "listStoreOrders", "GET", "/v1/store/orders", "", "", nil, 401},
		{"the caller's rate limits", "getRateLimit", "GET", "/v1/rate_limit", key, "", nil, 200},
		{"the rate limits of a caller over its limit", "getRateLimit", "GET", "/v1/rate_limit", tight, "", nil, 200},
		{"the rate limits without a key", "getRateLimit", "GET", "/v1/rate_limit", "", "", nil, 401},
		{"the rate limits of a banned caller", "getRateLimit", "GET", "/v1/rate_limit", banned, "", nil, 429},
		{"another method on the rate limits", "getRateLimit", "POST", "/v1/rate_limit", key, "", nil, 405},
		{"the document", "getOpenAPI", "GET", "/v1/openapi.yaml", "", "", nil, 200},
		{"another method on the document", "getOpenAPI", "PUT", "/v1/openapi.yaml", key, "", nil, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := s.do(tt.method, tt.target, tt.key, tt.body, tt.header...)
			if w.Code != tt.want {
				t.Fatalf("%s %s: HTTP status %d, want %d; body: %.200s", tt.method, tt.target, w.Code, tt.want, w.Body)
			}
			doc.checkAnswer(t, tt.operation, w)
		})
	}
}

// checkAnswer checks that the document lists w's status for operation,
// with every required header w has, and every header the document knows
// of that w sent.
func (d *openAPIDoc) checkAnswer(t *testing.T, operation string, w *httptest.ResponseRecorder) {
	t.Helper()
	known := make(map[string]bool)
	for _, r := range d.Components.Responses {
		for name := range r.Headers {
			known[http.CanonicalHeaderKey(name)] = true
		}
	}
	r, ok := d.operation(t, operation).Responses[strconv.Itoa(w.Code)]
	if !ok {
		t.Fatalf("%s answers %d, and the document does not document it", operation, w.Code)
	}
	r = d.response(t, r)
	documented := make(map[string]bool)
	for name, h := range r.Headers {
		documented[http.CanonicalHeaderKey(name)] = true
		if h = d.header(t, h); h.Required && w.Header().Get(name) == "" {
			t.Errorf("%s %d: documented required header %s is missing", operation, w.Code, name)
		}
		if c := h.Schema.Const; c != "" && w.Header().Get(name) != c {
			t.Errorf("%s %d: %s: %q, documented as %q", operation, w.Code, name, w.Header().Get(name), c)
		}
	}
	for name := range w.Header() {
		if known[name] && !documented[name] {
			t.Errorf("%s %d: the server sends %s, and the document does not document it on this response", operation, w.Code, name)
		}
	}
}

func TestOpenAPIServedWithoutAKeyIsExactlyTheEmbeddedDocument(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	w := s.do("GET", "/v1/openapi.yaml", "", "")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /v1/openapi.yaml without a key: HTTP status %d, want 200; body: %.200s", w.Code, w.Body)
	}
	if !bytes.Equal(w.Body.Bytes(), openapiYAML) {
		t.Errorf("GET /v1/openapi.yaml served %d bytes that differ from the %d embedded", w.Body.Len(), len(openapiYAML))
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/yaml" {
		t.Errorf("Content-Type: %q, want application/yaml as documented", ct)
	}
	if doc := readOpenAPI(t); doc.operation(t, "getOpenAPI").Responses["200"].Ref != "#/components/responses/OpenAPIDocument" {
		t.Error("getOpenAPI 200 is not the OpenAPIDocument response")
	} else if _, ok := doc.Components.Responses["OpenAPIDocument"].Content["application/yaml"]; !ok {
		t.Error("the OpenAPIDocument response is not application/yaml")
	}
}
