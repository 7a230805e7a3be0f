package replicate

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// Target is where the replica is: a --replicate-to or --from URL, checked.
type Target struct {
	raw string
}

// s3Options are the query parameters an s3:// URL may carry: where the
// store is and how to address it, never a credential. Litestream reads
// more (an SSE-C key among them), which a URL may not carry: a URL is
// shown in logs and answers.
var s3Options = []string{"endpoint", "region", "forcePathStyle", "force-path-style", "skipVerify", "skip-verify",
	"signPayload", "sign-payload", "storageClass", "storage-class", "concurrency", "partSize", "part-size"}

// ParseTarget checks a replica's URL: s3://BUCKET/PATH (with ?endpoint=
// for any S3-compatible store) or file:///ABSOLUTE/PATH. A URL with a user,
// a password or an unknown query parameter is refused: credentials come
// from the environment (docs/production.md, "Backup and restore").
func ParseTarget(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return Target{}, fmt.Errorf("%q is not a URL: use s3://BUCKET/PATH or file:///PATH", redactAll(raw))
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("%s carries a user or password: give credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never in the URL", Target{raw}.Shown())
	}
	switch u.Scheme {
	case "s3":
		return checkS3(u, raw)
	case "file":
		if u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(u.Path) || u.RawQuery != "" {
			return Target{}, fmt.Errorf("%s: a file URL is file:///ABSOLUTE/PATH, with no host and no query", Target{raw}.Shown())
		}
		return Target{raw}, nil
	}
	return Target{}, fmt.Errorf("%s: unknown scheme %q: use s3://BUCKET/PATH (with ?endpoint=URL for an S3-compatible store) or file:///PATH", Target{raw}.Shown(), u.Scheme)
}

func checkS3(u *url.URL, raw string) (Target, error) {
	t := Target{raw}
	if u.Host == "" {
		return Target{}, fmt.Errorf("%s names no bucket: use s3://BUCKET/PATH", t.Shown())
	}
	for name, values := range u.Query() {
		if !slices.Contains(s3Options, name) {
			return Target{}, fmt.Errorf("%s: query parameter %q is not taken (a URL may carry only %s; credentials and keys come from the environment)",
				t.Shown(), name, strings.Join(s3Options[:4], ", ")+" ...")
		}
		if name == "endpoint" {
			for _, v := range values {
				if e, err := url.Parse(v); err != nil || e.User != nil {
					return Target{}, fmt.Errorf("%s: the endpoint must be a URL without a user or password", t.Shown())
				}
			}
		}
	}
	return t, nil
}

// String is the URL as given; only ParseTarget's checks let it out.
func (t Target) String() string { return t.raw }

// Shown is the URL as logs and answers show it: a user and the value of
// every query parameter s3Options does not name are hidden, should a URL
// that carries one reach an error message.
func (t Target) Shown() string {
	u, err := url.Parse(t.raw)
	if err != nil {
		return redactAll(t.raw)
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	q := u.Query()
	for name := range q {
		if !slices.Contains(s3Options, name) || strings.Contains(q.Get(name), "@") {
			q.Set(name, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	s, _ := url.PathUnescape(u.String())
	return s
}

// redactAll is what is shown of a string that is not even a URL: its
// scheme, if any.
func redactAll(raw string) string {
	if scheme, _, ok := strings.Cut(raw, "://"); ok {
		return scheme + "://REDACTED"
	}
	return "REDACTED"
}

// ErrEmpty: the replica holds nothing yet.
var ErrEmpty = errors.New("the replica is empty")
