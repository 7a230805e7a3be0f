package server

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestRootRedirectsToTheAPIReference(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, method := range []string{"GET", "HEAD"} {
		w := s.do(method, "/", "", "")
		if w.Code != http.StatusFound || w.Header().Get("Location") != "/docs" {
			t.Errorf("%s /: %d Location %q, want 302 to /docs", method, w.Code, w.Header().Get("Location"))
		}
	}
	if w := s.do("GET", "/docs/", "", ""); w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/docs" {
		t.Errorf("GET /docs/: %d Location %q, want 301 to /docs", w.Code, w.Header().Get("Location"))
	}
}

func TestAPIReferenceNeedsNoKeyAndIsNotRateLimited(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	tests := []struct {
		name, target, contentType string
	}{
		{"the page", "/docs", "text/html; charset=utf-8"},
		{"its script", "/docs/assets/docs.js", "text/javascript; charset=utf-8"},
		{"Swagger UI", "/docs/assets/swagger-ui-bundle.js", "text/javascript; charset=utf-8"},
		{"its styles", "/docs/assets/swagger-ui.css", "text/css; charset=utf-8"},
		{"its icon", "/docs/assets/favicon-32x32.png", "image/png"},
		{"its licence", "/docs/assets/LICENSE", "text/plain; charset=utf-8"},
		{"the document it shows", "/docs/openapi.yaml", "application/yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// More than the 60 a minute that an address without a key gets.
			for i := range 70 {
				w := s.do("GET", tt.target, "", "")
				if w.Code != http.StatusOK {
					t.Fatalf("request %d: GET %s: %d, want 200: %.200s", i+1, tt.target, w.Code, w.Body)
				}
				if ct := w.Header().Get("Content-Type"); ct != tt.contentType {
					t.Fatalf("GET %s: Content-Type %q, want %q", tt.target, ct, tt.contentType)
				}
				if w.Header().Get("X-Ratelimit-Limit") != "" {
					t.Fatalf("GET %s carries rate-limit headers: it is counted", tt.target)
				}
			}
		})
	}
	w := s.do("GET", "/docs/assets/nothing.js", "", "")
	wantError(t, w, http.StatusNotFound, "not_found")
}

func TestAPIReferencePageMayFetchOnlyFromItsOwnServer(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	w := s.do("GET", "/docs", "", "")
	csp := w.Header().Get("Content-Security-Policy")
	for _, directive := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "img-src 'self' data:"} {
		if !strings.Contains(csp, directive) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, directive)
		}
	}
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, name := range []string{"webui/index.html", "webui/docs.js"} {
		b, err := fs.ReadFile(docsFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to another host: %s", name, m)
		}
	}
	script, _ := fs.ReadFile(docsFiles, "webui/docs.js")
	if !bytes.Contains(script, []byte(`validatorUrl: "none"`)) {
		t.Error("docs.js does not turn off Swagger UI's online validator (validatorUrl: \"none\")")
	}
	// Every file the page names is embedded and served.
	page, _ := fs.ReadFile(docsFiles, "webui/index.html")
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllSubmatch(page, -1) {
		target := string(m[1])
		if w := s.do("GET", target, "", ""); w.Code != http.StatusOK {
			t.Errorf("the page names %s, which answers %d", target, w.Code)
		}
	}
}

func TestSwaggerUIIsPinnedWithItsLicenceBesideIt(t *testing.T) {
	t.Parallel()
	version, err := fs.ReadFile(docsFiles, "webui/swagger-ui/VERSION")
	if err != nil || !regexp.MustCompile(`^\d+\.\d+\.\d+\n$`).Match(version) {
		t.Errorf("webui/swagger-ui/VERSION = %q (%v), want the pinned release, such as 5.35.0", version, err)
	}
	licence, err := fs.ReadFile(docsFiles, "webui/swagger-ui/LICENSE")
	if err != nil || !bytes.Contains(licence, []byte("Apache License")) {
		t.Errorf("webui/swagger-ui/LICENSE is missing or not Swagger UI's Apache licence (%v)", err)
	}
	var total int
	err = fs.WalkDir(docsFiles, "webui", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			total += int(info.Size())
		}
		return nil
	})
	if err != nil || total == 0 {
		t.Fatalf("walk the embedded reference: %d bytes (%v)", total, err)
	}
	if total > 3<<20 {
		t.Errorf("the embedded reference is %d bytes: keep only the files the page loads", total)
	}
}

func TestAPIReferenceDocumentTargetsTheServerThatServesIt(t *testing.T) {
	t.Parallel()
	var original, served map[string]any
	if err := yaml.Unmarshal(openapiYAML, &original); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(docsSpec(openapiYAML), &served); err != nil {
		t.Fatalf("the reference's openapi.yaml is not YAML: %v", err)
	}
	servers, _ := served["servers"].([]any)
	if len(servers) != 1 || servers[0].(map[string]any)["url"] != "/v1" {
		t.Errorf("servers %v, want only /v1 of the serving origin", served["servers"])
	}
	delete(original, "servers")
	delete(served, "servers")
	if !maps.EqualFunc(original, served, func(a, b any) bool {
		x, _ := yaml.Marshal(a)
		y, _ := yaml.Marshal(b)
		return bytes.Equal(x, y)
	}) {
		t.Error("the reference's openapi.yaml differs from /v1/openapi.yaml in more than its servers")
	}
}

func TestAPIReferenceFilesAreRevalidatedAndGzipped(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	plain := s.do("GET", "/docs/assets/swagger-ui-bundle.js", "", "")
	zipped := s.do("GET", "/docs/assets/swagger-ui-bundle.js", "", "", "Accept-Encoding", "gzip, deflate, br")
	if zipped.Header().Get("Content-Encoding") != "gzip" || zipped.Body.Len() >= plain.Body.Len()/2 {
		t.Fatalf("with Accept-Encoding gzip: Content-Encoding %q, %d bytes against %d plain",
			zipped.Header().Get("Content-Encoding"), zipped.Body.Len(), plain.Body.Len())
	}
	zr, err := gzip.NewReader(zipped.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if !bytes.Equal(unzipped, plain.Body.Bytes()) {
		t.Error("the gzipped file is not the file")
	}
	for _, w := range []interface{ Header() http.Header }{plain, zipped} {
		etag := w.Header().Get("ETag")
		again := s.do("GET", "/docs/assets/swagger-ui-bundle.js", "", "", "If-None-Match", etag,
			"Accept-Encoding", w.Header().Get("Content-Encoding"))
		if etag == "" || again.Code != http.StatusNotModified {
			t.Errorf("revalidation with ETag %q: %d, want 304", etag, again.Code)
		}
	}
	if plain.Header().Get("ETag") == zipped.Header().Get("ETag") {
		t.Error("the plain and gzipped files share an ETag")
	}
}

func TestOpenAPIAtTheRootLeadsToTheDocument(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, method := range []string{"GET", "HEAD"} {
		w := s.do(method, "/openapi.yaml", "", "")
		if w.Code != http.StatusMovedPermanently || w.Header().Get("Location") != "/v1/openapi.yaml" {
			t.Errorf("%s /openapi.yaml: %d Location %q, want 301 to /v1/openapi.yaml", method, w.Code, w.Header().Get("Location"))
		}
	}
}
