package main

import (
	"strconv"
	"unicode/utf8"

	"petstore/internal/domain"
)

// The service writes its few response shapes by hand: a Pet is four fields,
// and appending them to one buffer costs a fraction of encoding/json's
// reflection on the hot list path. The output decodes to what encoding/json
// would write with SetEscapeHTML(false); it differs only in spelling \b and
// \f as \u0008 and \u000c.

func appendPet(b []byte, p *domain.Pet) []byte {
	b = append(b, `{"id":`...)
	b = appendInt(b, p.ID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, p.Name)
	b = append(b, `,"categoryId":`...)
	b = appendInt(b, p.CategoryID)
	if p.Status != "" {
		b = append(b, `,"status":`...)
		b = appendJSONString(b, p.Status)
	}
	return append(b, '}')
}

func appendPets(b []byte, pets []domain.Pet) []byte {
	b = append(b, '[')
	for i := range pets {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPet(b, &pets[i])
	}
	return append(b, ']', '\n')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// and U+2028 and U+2029 are escaped so the output is also valid JavaScript.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }
