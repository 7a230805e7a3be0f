package server

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"petstore/internal/httpapi"
	"petstore/internal/store"
)

// The handlers of the routes outside both APIs' handler packages: the
// health probes, the APIs' documents, and the public listener's pointer to
// the admin API. None needs a key or counts against a limit (/v1/openapi.yaml
// aside, which routes.go counts as any keyless route).

// adminElsewhere answers the admin API's paths on the public listener: 404,
// with where the admin API is served.
func adminElsewhere() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeNotFound, "no resource at %s on this listener: the admin API is served only on the admin listener, "+
			"petstore serve --admin-addr HOST:PORT, under /admin/v1 (docs/admin.md)", r.URL.Path))
	})
}

// handleDocument serves an OpenAPI document (YAML).
func handleDocument(doc []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
		w.Write(doc)
	})
}

func handleHealth() http.Handler {
	body := []byte(`{"status":"ok"}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteBody(w, http.StatusOK, body)
	})
}

func handleReady(db store.Lifecycle, draining *atomic.Bool) http.Handler {
	body := []byte(`{"status":"ready"}` + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeUnavailable, "the server is shutting down"))
			return
		}
		if err := db.Ping(r.Context()); err != nil {
			httpapi.RecordOf(w).Failed(err, 0)
			httpapi.WriteError(w, httpapi.Errorf(httpapi.CodeUnavailable, "the database does not answer"))
			return
		}
		httpapi.WriteBody(w, http.StatusOK, body)
	})
}
