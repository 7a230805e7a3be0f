package server

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"petstore/internal/httpapi"
)

// The API reference at GET /docs: Swagger UI (npm swagger-ui-dist, the
// version in webui/swagger-ui/VERSION, updated by webui/update.sh) on the
// served openapi.yaml. Every file is in the binary: the page works with no
// internet access, and its Content-Security-Policy lets the browser fetch
// nothing from anywhere but this server.
// The files are the module root's webui/, which the root embeds and
// passes in (Deps.Files).

// docsPolicy is the page's Content-Security-Policy: scripts, styles, images
// and requests from this origin only. Swagger UI sets inline styles.
const docsPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsAssets are the reference page and the files it loads, by name:
// Swagger UI's and docs.js; routes.go serves them.
func docsAssets(docsFiles fs.FS) (page *docsFile, assets map[string]*docsFile) {
	assets = embeddedFiles(docsFiles, "webui/swagger-ui")
	assets["docs.js"] = embeddedFile(docsFiles, "webui/docs.js")
	return embeddedFile(docsFiles, "webui/index.html"), assets
}

// embeddedFiles are the files of dir in fsys by name.
func embeddedFiles(fsys fs.FS, dir string) map[string]*docsFile {
	files := map[string]*docsFile{}
	entries, _ := fs.ReadDir(fsys, dir)
	for _, e := range entries {
		files[e.Name()] = embeddedFile(fsys, dir+"/"+e.Name())
	}
	return files
}

func embeddedFile(fsys fs.FS, name string) *docsFile {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic(err) // embedded by the root: a missing file is a broken build
	}
	return newDocsFile(name, b)
}

// serveFileOf serves the file of files that the path's {file} names; any
// other name is not_found.
func serveFileOf(files map[string]*docsFile) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[r.PathValue("file")]
		if !ok {
			httpapi.NotFound().ServeHTTP(w, r)
			return
		}
		f.ServeHTTP(w, r)
	})
}

// docsFile serves one file with an ETag, so that a browser revalidates it
// with a 304 instead of fetching it again, gzipped when the browser takes it
// (once, at the first such request).
type docsFile struct {
	name  string
	body  []byte
	etag  string
	gzip  func() []byte
	ctype string
	// policy is the Content-Security-Policy sent with it (and then
	// Referrer-Policy: no-referrer): a page's, empty for the rest.
	policy string
}

func newDocsFile(name string, body []byte) *docsFile {
	sum := sha256.Sum256(body)
	f := &docsFile{name: name, body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	f.ctype = cmp.Or(contentTypes[path.Ext(name)], "text/plain; charset=utf-8")
	if strings.HasSuffix(name, ".html") {
		f.policy = docsPolicy
	}
	f.gzip = sync.OnceValue(func() []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(body)
		zw.Close()
		return buf.Bytes()
	})
	return f
}

// contentTypes are the Content-Types of the files served, by extension;
// any other (LICENSE, NOTICE, VERSION, *.LICENSE.txt) is plain text.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
	".png": "image/png", ".svg": "image/svg+xml", ".yaml": "application/yaml",
}

func (f *docsFile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", f.ctype)
	h.Set("Cache-Control", "no-cache") // revalidate: the ETag makes that a 304
	h.Set("X-Content-Type-Options", "nosniff")
	if f.policy != "" {
		h.Set("Content-Security-Policy", f.policy)
		h.Set("Referrer-Policy", "no-referrer")
	}
	body, etag := f.body, f.etag
	if len(body) > 1024 && !strings.HasSuffix(f.name, ".png") {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			body, etag = f.gzip(), strings.TrimSuffix(etag, `"`)+`-gzip"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// docsSpec is openapi.yaml as the reference page reads it: its servers are
// deployments (a production and a staging host) that the page's origin need
// not be, so they give way to /v1 of whatever server serves the page.
func docsSpec(doc []byte) []byte {
	var out bytes.Buffer
	inServers := false
	for line := range strings.Lines(string(doc)) {
		if strings.TrimSpace(line) != "" && line[0] != ' ' && line[0] != '#' {
			// A top-level key: the servers block, or the end of it.
			inServers = strings.HasPrefix(line, "servers:")
			if inServers {
				out.WriteString("servers:\n" +
					"  - url: /v1\n" +
					"    description: This server, the one that serves this reference.\n")
				continue
			}
		}
		if !inServers || strings.TrimSpace(line) == "" {
			out.WriteString(line)
		}
	}
	return out.Bytes()
}

// The owner's console (docs/admin.md "Console"): one page at /console/ on
// the admin listener only, plain HTML, CSS and JavaScript modules embedded
// in the binary (the root embeds console/ and passes it in), a client of
// /admin/v1 from the same origin like any other. It needs no build step and
// asks nothing of any other host.

// consolePolicy is the console's Content-Security-Policy: its own files
// only, no inline script or style, no eval, nothing framing it, no form
// sent anywhere; and Trusted Types required, so that no string can become
// HTML through innerHTML and the like: every value is shown as text.
const consolePolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// consoleAssets are the console's page and its files by name, each sent
// with the console's policy; routes.go serves them, the page at /console/
// only.
func consoleAssets(consoleFiles fs.FS) (page *docsFile, assets map[string]*docsFile) {
	assets = embeddedFiles(consoleFiles, "console")
	for _, f := range assets {
		f.policy = consolePolicy
	}
	page = assets["index.html"]
	delete(assets, "index.html")
	return page, assets
}
