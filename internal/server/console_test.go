package server

import (
	"bytes"
	"compress/gzip"
	"io/fs"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The owner's console as files (webui.go): where it is served, with what
// headers, how small, and what its code never does. console_browser_test.go
// uses it in Chromium.

func TestConsoleIsOnTheAdminListenerOnly(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	for _, target := range []string{"/console/", "/console/app.js", "/console", "/console/console.css"} {
		if w := s.do("GET", target, "", ""); w.Code != http.StatusNotFound {
			t.Errorf("GET %s on the public listener: %d, want 404", target, w.Code)
		}
	}
	tests := []struct {
		target string
		want   int
		ctype  string
	}{
		{"/console/", 200, "text/html; charset=utf-8"},
		{"/console/app.js", 200, "text/javascript; charset=utf-8"},
		{"/console/console.css", 200, "text/css; charset=utf-8"},
		{"/console/icon.svg", 200, "image/svg+xml"},
		{"/console", 301, ""},
		{"/console/index.html", 404, ""},
		{"/console/nothing.js", 404, ""},
		{"/console/a/b.js", 404, ""},
	}
	for _, tt := range tests {
		w := s.admin("GET", tt.target, "", "", "Origin", "https://evil.example")
		if w.Code != tt.want || (tt.ctype != "" && w.Header().Get("Content-Type") != tt.ctype) {
			t.Errorf("GET %s on the admin listener: %d %s, want %d %s", tt.target, w.Code, w.Header().Get("Content-Type"), tt.want, tt.ctype)
		}
		for name := range w.Header() {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("GET %s: %s sent", tt.target, name)
			}
		}
	}
	if w := s.admin("POST", "/console/", "", ""); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /console/: %d, want 405", w.Code)
	}
}

func TestConsoleFilesCarryAStrictPolicy(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	want := []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'",
		"base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'", "require-trusted-types-for 'script'"}
	for _, target := range []string{"/console/", "/console/app.js", "/console/console.css"} {
		w := s.admin("GET", target, "", "")
		h := w.Header()
		policy := h.Get("Content-Security-Policy")
		for _, directive := range want {
			if !strings.Contains(policy, directive) {
				t.Errorf("GET %s: Content-Security-Policy %q lacks %s", target, policy, directive)
			}
		}
		for _, loose := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*", "data:"} {
			if strings.Contains(policy, loose) {
				t.Errorf("GET %s: Content-Security-Policy allows %s", target, loose)
			}
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: X-Content-Type-Options %q, Referrer-Policy %q", target, h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
	}
}

// consoleBudget is the most all of the console's files may weigh, gzipped.
const consoleBudget = 200 << 10

func TestConsoleFilesWeighUnder200KiBGzipped(t *testing.T) {
	t.Parallel()
	var all bytes.Buffer
	zw := gzip.NewWriter(&all)
	n := 0
	fs.WalkDir(consoleFiles, "console", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(consoleFiles, path)
			zw.Write(b)
			n++
		}
		return err
	})
	zw.Close()
	t.Logf("the console: %d files, %d bytes gzipped", n, all.Len())
	if all.Len() > consoleBudget || n < 5 {
		t.Errorf("the console's %d files weigh %d bytes gzipped, want at most %d", n, all.Len(), consoleBudget)
	}
}

func TestConsoleCodeNeverMakesHTMLOfTextNorAsksAnotherHost(t *testing.T) {
	t.Parallel()
	// The policy enforces most of this in the browser; this keeps the
	// source honest where a browser test would not pass through.
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|setTimeout\(['"]|localStorage\.setItem|document\.cookie\s*=|style=`)
	hosts := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	fs.WalkDir(consoleFiles, "console", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(consoleFiles, path)
		for i, line := range strings.Split(string(b), "\n") {
			if m := forbidden.FindString(line); m != "" {
				t.Errorf("%s:%d: %s", path, i+1, m)
			}
			for _, m := range hosts.FindAllString(line, -1) {
				// The SVG namespace is a name, never fetched; an example
				// URL is placeholder text.
				if m != "http://www.w3.org" && !strings.Contains(m, "example.com") {
					t.Errorf("%s:%d: another host: %s", path, i+1, m)
				}
			}
		}
		return nil
	})
}
