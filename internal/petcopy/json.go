package petcopy

import (
	"strconv"

	"petstore/internal/appendjson"
	"petstore/internal/domain"
)

// The service writes its few response shapes by hand: a Pet is four fields,
// and appending them to one buffer costs a fraction of encoding/json's
// reflection on the hot list path. The output decodes to what encoding/json
// would write with SetEscapeHTML(false); it differs only in spelling \b and
// \f as \u0008 and \u000c.

// AppendPet appends p as the API's JSON object.
func AppendPet(b []byte, p *domain.Pet) []byte {
	b = append(b, `{"id":`...)
	b = appendInt(b, p.ID)
	b = append(b, `,"name":`...)
	b = appendjson.String(b, p.Name)
	b = append(b, `,"categoryId":`...)
	b = appendInt(b, p.CategoryID)
	if p.Status != "" {
		b = append(b, `,"status":`...)
		b = appendjson.String(b, p.Status)
	}
	return append(b, '}')
}

func appendPets(b []byte, pets []domain.Pet) []byte {
	b = append(b, '[')
	for i := range pets {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendPet(b, &pets[i])
	}
	return append(b, ']', '\n')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }
