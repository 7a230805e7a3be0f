package main

import (
	"embed"
	"net/http"
	"petstore/internal/httpapi"
)

// The owner's console (docs/admin.md "Console"): one page at /console/ on
// the admin listener only, plain HTML, CSS and JavaScript modules embedded
// in the binary, a client of /admin/v1 from the same origin like any other.
// It needs no build step and asks nothing of any other host.
//
//go:embed console
var consoleFiles embed.FS

// consolePolicy is the console's Content-Security-Policy: its own files
// only, no inline script or style, no eval, nothing framing it, no form
// sent anywhere; and Trusted Types required, so that no string can become
// HTML through innerHTML and the like: every value is shown as text.
const consolePolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// addConsoleRoutes serves the console on the admin listener's mux: the page
// at /console/, its files beside it. It needs no token: the page asks for
// one and sends it to /admin/v1 itself.
func addConsoleRoutes(mux *http.ServeMux) {
	assets := embeddedFiles(consoleFiles, "console")
	for _, f := range assets {
		f.policy = consolePolicy
	}
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	mux.Handle("GET /console/{$}", assets["index.html"])
	delete(assets, "index.html") // the page is /console/ only
	mux.Handle("GET /console/{file}", serveFileOf(assets))
	mux.Handle("GET /console/", httpapi.NotFound())
	mux.Handle("/console/", httpapi.MethodNotAllowed("GET, HEAD"))
}
