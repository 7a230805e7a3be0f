// Package httpapi is what the two HTTP APIs share, the public /v1 and the
// owner's /admin/v1: the request's record that the steps of a request
// write in order and find on the ResponseWriter (record.go); the one error
// writer, the one table from the domain's errors and the API's codes to
// statuses and client text (errors.go); the one JSON body decoder, which
// answers in the domain's terms (decode.go); the step that makes the
// record, logs the request and counts it (LogRequests); and the small
// pieces both APIs answer with (http.go).
//
// It imports the domain, the keyring (the record holds the caller's key
// and its note of use), the limits (their decision), the metrics, the log
// line and appendjson. The routes and the handlers are the root's and
// internal/adminapi's.
package httpapi
