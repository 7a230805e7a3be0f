package petcopy

import (
	"strconv"

	"petstore/internal/domain"
)

// Query is a validated query string of listPets (the root's
// parseListQuery reads it).
type Query struct {
	Limit  int
	Status string
	After  int64 // from the cursor: list ids above this one
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
	b = domain.AppendCursor(b, last)
	b = append(b, `>; rel="next"`...)
	return string(b)
}
