package httpapi

import (
	"strconv"

	"petstore/internal/appendjson"
	"petstore/internal/domain"
	"petstore/internal/limits"
)

// AppendRateLimitStatus appends key's plan, scopes and windows s as JSON:
// the body of GET /v1/rate_limit and of the admin API's
// GET /admin/v1/keys/{id}/limits.
func AppendRateLimitStatus(b []byte, key *domain.Key, s limits.Standing) []byte {
	b = append(b, `{"plan":`...)
	b = appendjson.String(b, key.Plan)
	b = appendScopes(append(b, `,"scopes":`...), key.Scopes)
	b = appendWindow(append(b, `,"minute":`...), s.Minute)
	b = appendWindow(append(b, `,"day":`...), s.Day)
	return append(b, "}\n"...)
}

func appendWindow(b []byte, win limits.Window) []byte {
	b = append(b, `{"limit":`...)
	b = strconv.AppendInt(b, win.Limit, 10)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, max(0, win.Remaining), 10)
	b = append(b, `,"reset":`...)
	b = strconv.AppendInt(b, win.Reset.Unix(), 10)
	return append(b, '}')
}

// appendScopes appends s as a JSON array of scope names.
func appendScopes(b []byte, s domain.ScopeSet) []byte {
	b = append(b, '[')
	for i, name := range s.Names() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendjson.String(b, name)
	}
	return append(b, ']')
}
