package petcopy

import (
	"encoding/base64"
	"strconv"
	"strings"

	"petstore/internal/domain"
)

// Query is a validated query string of listPets (the root's
// parseListQuery reads it).
type Query struct {
	Limit  int
	Status string
	After  int64 // from the cursor: list ids above this one
}

// A cursor is opaque to clients; inside, it is the last id of the page
// before, so the next page is a keyset query that stays fast on any page.
// The admin API's lists use the same.
const cursorPrefix = "after:"

// EncodeCursor is the cursor of the page after the one that ended at id
// after.
func EncodeCursor(after int64) string { return string(appendCursor(nil, after)) }

func appendCursor(b []byte, after int64) []byte {
	var plain [len(cursorPrefix) + 20]byte
	return base64.RawURLEncoding.AppendEncode(b, strconv.AppendInt(append(plain[:0], cursorPrefix...), after, 10))
}

// DecodeCursor reads the id a cursor continues after; ok is false when s is
// not a cursor EncodeCursor could have written.
func DecodeCursor(s string) (after int64, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	return domain.ParseID(string(b[len(cursorPrefix):]))
}

// nextLink is the RFC 8288 Link to the page after the one that ended at id,
// keeping the request's other parameters.
func nextLink(q Query, last int64) string {
	b := make([]byte, 0, 96)
	b = append(b, "</v1/pets?limit="...)
	b = strconv.AppendInt(b, int64(q.Limit), 10)
	if q.Status != "" {
		b = append(b, "&status="...)
		b = append(b, q.Status...)
	}
	b = append(b, "&cursor="...)
	b = appendCursor(b, last)
	b = append(b, `>; rel="next"`...)
	return string(b)
}
