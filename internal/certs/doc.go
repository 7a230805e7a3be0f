// Package certs is where the server's certificates come from
// (docs/production.md, "HTTPS on a small VM"): a pair of PEM files, read at
// start, polled and read again when they change or on SIGHUP, a pair that
// does not load tolerated for a grace and then an ERROR, the current one
// serving meanwhile (Files, tls.go); or an ACME CA through certmagic
// (ACME, acme.go): issuing, renewal, waiting for the first certificates,
// the CA being away, certmagic's logs written into the server's. It makes
// a listener's tls.Config.
//
// Of the project it imports only the metrics. It never imports net/http:
// the listeners, the HTTP/2 limits, the HSTS middleware and the answer to
// the CA's HTTP-01 challenge (over Issuer) are the root's. The database
// that keeps the ACME certificates on PostgreSQL arrives as a
// certmagic.Storage.
package certs
