// Ceiling is the load benchmark's yardstick: a bare net/http server that
// answers the pet store's paths with fixed bytes, with no auth, limits,
// logging or storage. No Go HTTP service on the same machine can beat it,
// so the benchmark reports the pet store's throughput as a ratio to it.
// With -tls-cert and -tls-key it serves HTTPS, HTTP/2 beside HTTP/1.1, the
// yardstick of bench/https.sh's HTTP/2 comparison.
//
// With -headers it also sends the response headers the pet store must send
// (rate limits, request id, and per operation its Link, Location or
// deprecation headers), with values of the same length, and leaves
// Content-Length to net/http as the pet store does: the ceiling of a service
// that has to send them, which shows what they cost.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
)

// header is one response header, set without allocating.
type header struct{ key, value string }

// What every answer under /v1 carries, as the pet store sends it to the
// load benchmark's Enterprise key, and what each operation adds: no more
// than the pet store spends on them.
var (
	metered = []header{
		{"Ratelimit", `"minute";r=999999999999;t=1`},
		{"Ratelimit-Policy", `"minute";q=1000000000000;w=60, "day";q=1000000000000000;w=86400`},
		{"X-Ratelimit-Limit", "1000000000000"},
		{"X-Ratelimit-Remaining", "999999999999"},
		{"X-Ratelimit-Reset", "1795313783"},
		{"X-Request-Id", "039d64af7f52-1bxr"},
	}
	listHeaders   = []header{{"Link", `</v1/pets?limit=20&cursor=YWZ0ZXI6MjA>; rel="next"`}}
	createHeaders = []header{{"Location", "/v1/pets/1000001"}}
	getHeaders    = []header{
		{"Deprecation", "@1767225600"},
		{"Sunset", "Thu, 05 Dec 2030 00:00:00 GMT"},
		{"Link", `</v1/pets>; rel="successor-version"`},
	}
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8099", "address to listen on")
	withHeaders := flag.Bool("headers", false, "send the headers the pet store must send")
	tlsCert := flag.String("tls-cert", "", "serve HTTPS (HTTP/2 and HTTP/1.1, net/http's defaults) with this PEM certificate")
	tlsKey := flag.String("tls-key", "", "the PEM key of -tls-cert")
	flag.Parse()

	page, pet := bodies()
	mux := http.NewServeMux()
	mux.Handle("GET /v1/pets", fixed(*withHeaders, http.StatusOK, page, listHeaders))
	mux.Handle("POST /v1/pets", fixed(*withHeaders, http.StatusCreated, pet, createHeaders))
	mux.Handle("GET /v1/pets/{petId}", fixed(*withHeaders, http.StatusOK, pet, getHeaders))
	mux.Handle("GET /readyz", fixed(*withHeaders, http.StatusOK, []byte(`{"status":"ready"}`), nil))
	// bench/load.sh's TRACING runs post their spans to a ceiling of their
	// own: an OTLP/HTTP export read and dropped, answered with an empty
	// (valid) ExportTraceServiceResponse.
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	if *tlsCert != "" {
		log.Fatal(http.ListenAndServeTLS(*addr, *tlsCert, *tlsKey, mux))
	}
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// bodies are the same bytes the pet store sends for a page of 20 and for
// one pet, so that both servers put the same payload on the wire.
func bodies() (page, pet []byte) {
	statuses := []string{"pending", "sold", "available"}
	page = []byte("[")
	for i := 1; i <= 20; i++ {
		if i > 1 {
			page = append(page, ',')
		}
		page = fmt.Appendf(page, `{"id":%d,"name":"pet-%d","categoryId":%d,"status":%q}`, i, i, i%50+1, statuses[i%3])
	}
	page = append(page, "]\n"...)
	return page, []byte(`{"id":1,"name":"pet-1","categoryId":2,"status":"pending"}` + "\n")
}

// fixed answers status and body; withHeaders, with the metered headers
// and extra (none on /readyz, where extra is nil).
func fixed(withHeaders bool, status int, body []byte, extra []header) http.HandlerFunc {
	n := strconv.Itoa(len(body))
	if !withHeaders {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", n)
			w.WriteHeader(status)
			w.Write(body)
		}
	}
	var keys []string
	var values [][]string
	if extra != nil {
		for _, kv := range append(append([]header{}, metered...), extra...) {
			keys, values = append(keys, kv.key), append(values, []string{kv.value})
		}
	}
	contentType := []string{"application/json"}
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = contentType
		for i, k := range keys {
			h[k] = values[i]
		}
		w.WriteHeader(status)
		w.Write(body)
	}
}
