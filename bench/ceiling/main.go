// Ceiling is the load benchmark's yardstick: a bare net/http server that
// answers the pet store's paths with fixed bytes, with no auth, limits,
// logging or storage. No Go HTTP service on the same machine can beat it,
// so the benchmark reports the pet store's throughput as a ratio to it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"strconv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8099", "address to listen on")
	flag.Parse()

	// The same bytes the pet store sends for a page of 20 and for one pet,
	// so that both servers put the same payload on the wire.
	statuses := []string{"pending", "sold", "available"}
	page := []byte("[")
	for i := 1; i <= 20; i++ {
		if i > 1 {
			page = append(page, ',')
		}
		page = fmt.Appendf(page, `{"id":%d,"name":"pet-%d","categoryId":%d,"status":%q}`, i, i, i%50+1, statuses[i%3])
	}
	page = append(page, "]\n"...)
	pet := []byte(`{"id":1,"name":"pet-1","categoryId":2,"status":"pending"}` + "\n")
	fixed := func(status int, body []byte) http.HandlerFunc {
		n := strconv.Itoa(len(body))
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", n)
			w.WriteHeader(status)
			w.Write(body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/pets", fixed(http.StatusOK, page))
	mux.Handle("POST /v1/pets", fixed(http.StatusCreated, pet))
	mux.Handle("GET /v1/pets/{petId}", fixed(http.StatusOK, pet))
	mux.Handle("GET /readyz", fixed(http.StatusOK, []byte(`{"status":"ready"}`)))
	log.Fatal(http.ListenAndServe(*addr, mux))
}
