package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"petstore/internal/domain"
)

const (
	MaxBodyBytes   = 64 << 10
	MaxNameRunes   = 200
	maxInt64String = "9223372036854775807"
)

// newPetBody is the createPet body as sent: each field kept raw, so that a
// missing field, a null and a value of the wrong type each get their own
// message.
type newPetBody struct {
	Name, CategoryID, Status json.RawMessage
}

// DecodeNewPet reads and validates a createPet body: JSON content type, at
// most MaxBodyBytes, exactly one object, known fields only, valid values.
// The error it returns is ready for WriteError: a domain error, malformed
// (not one JSON object) or invalid (its message names the field), or the
// HTTP edge's own 415 and 413 for the request's Content-Type and size.
func DecodeNewPet(w http.ResponseWriter, r *http.Request) (domain.Pet, error) {
	if err := checkContentType(FirstHeader(r.Header, "Content-Type")); err != nil {
		return domain.Pet{}, err
	}
	if r.ContentLength > 0 && r.ContentLength <= smallBodyBytes {
		return readSmallNewPet(r.Body, r.ContentLength)
	}
	var pet domain.Pet
	var err error = errTooLarge
	if r.ContentLength <= MaxBodyBytes {
		pet, err = readNewPet(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	}
	if err == errTooLarge {
		// Without this net/http reads on through up to 256 KiB of the
		// refused body before it sends the 413 (MaxBytesReader would tell
		// it not to, but it cannot see through LogRequests' writer).
		w.Header().Set("Connection", "close")
	}
	return pet, err
}

// readNewPet decodes and validates a body already limited in size.
func readNewPet(body io.Reader) (domain.Pet, error) {
	f, err := readObject(body, newPetFieldNames, "a pet has only name, categoryId and status")
	if err != nil {
		return domain.Pet{}, err
	}
	return newPetBody{Name: f["name"], CategoryID: f["categoryId"], Status: f["status"]}.validate()
}

var newPetFieldNames = []string{"name", "categoryId", "status"}

// readObject reads a body already limited in size that must be exactly one
// JSON object of the fields named in known, each given once, and returns
// each field's raw value; has says what the object may hold, for the
// message about an unknown field. It reads the object field by field:
// encoding/json alone would take "Name" for "name" and let a repeated field
// silently win over the first.
func readObject(body io.Reader, known []string, has string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(body)
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err)
	}
	if tok != json.Delim('{') {
		return nil, domain.Malformed("the body must be a JSON object, not %s", jsonKind(tok))
	}
	// From here on the body has begun: an end is an unexpected one.
	broken := func(err error) error {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return jsonError(err)
	}
	fields := make(map[string]json.RawMessage, len(known))
	var problem error // the first field at fault; broken JSON later on wins over it
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, broken(err)
		}
		name := tok.(string) // inside an object, More and Token yield a key here
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, broken(err)
		}
		switch {
		case problem != nil:
		case !slices.Contains(known, name):
			problem = domain.Invalid("unknown field %q: %s", name, has)
		case fields[name] != nil: // a value decoded is never nil, not even null
			problem = domain.Invalid("%s is given twice", name)
		default:
			fields[name] = raw
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, broken(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if tooLarge(err) {
			return nil, errTooLarge
		}
		return nil, domain.Malformed("the body must hold exactly one JSON object, and it has more after the object")
	}
	if problem != nil {
		return nil, problem
	}
	return fields, nil
}

// DecodeObject reads a request's body as readObject does, after checking
// its content type and within MaxBodyBytes: the admin API's bodies.
func DecodeObject(w http.ResponseWriter, r *http.Request, known []string, has string) (map[string]json.RawMessage, error) {
	if err := checkContentType(FirstHeader(r.Header, "Content-Type")); err != nil {
		return nil, err
	}
	if r.ContentLength > MaxBodyBytes {
		w.Header().Set("Connection", "close")
		return nil, errTooLarge
	}
	fields, err := readObject(http.MaxBytesReader(w, r.Body, MaxBodyBytes), known, has)
	if err == errTooLarge {
		w.Header().Set("Connection", "close") // as DecodeNewPet, for the same reason
	}
	return fields, err
}

// smallBodyBytes is the largest body read whole before it is decoded, when
// the request says its length. A pet fits in a few hundred bytes.
const smallBodyBytes = 4 << 10

// readSmallNewPet reads a body of a declared length and decodes it as
// readNewPet would from the stream.
func readSmallNewPet(body io.Reader, length int64) (domain.Pet, error) {
	b := make([]byte, length)
	n, err := io.ReadFull(body, b)
	if err != nil {
		// Decode what came, then the read's error, as the stream would.
		return readNewPet(io.MultiReader(bytes.NewReader(b[:n]), errorReader{err}))
	}
	if in, ok := scanNewPet(b); ok {
		return in.validate()
	}
	return readNewPet(bytes.NewReader(b))
}

type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }

// scanNewPet reads the usual createPet body, an object of name, categoryId
// and status with plain strings and integers, into the raw fields that
// readNewPet would find, without encoding/json's token-by-token decoder:
// that decoder costs more than storing the pet. It gives up (ok false) on
// anything else, from an escape in a string to a repeated field, and
// readNewPet decides. FuzzScanNewPet checks that the two always agree.
func scanNewPet(b []byte) (in newPetBody, ok bool) {
	i := skipJSONSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return in, false
	}
	i = skipJSONSpace(b, i+1)
	for {
		key, end, ok := scanPlainString(b, i)
		if !ok {
			return in, false
		}
		var field *json.RawMessage
		switch string(key) {
		case "name":
			field = &in.Name
		case "categoryId":
			field = &in.CategoryID
		case "status":
			field = &in.Status
		default:
			return in, false
		}
		if *field != nil {
			return in, false
		}
		i = skipJSONSpace(b, end)
		if i == len(b) || b[i] != ':' {
			return in, false
		}
		i = skipJSONSpace(b, i+1)
		if i < len(b) && b[i] == '"' {
			_, end, ok = scanPlainString(b, i)
		} else {
			end, ok = scanPlainInteger(b, i)
		}
		if !ok {
			return in, false
		}
		*field = b[i:end]
		i = skipJSONSpace(b, end)
		if i == len(b) {
			return in, false
		}
		if b[i] == '}' {
			return in, skipJSONSpace(b, i+1) == len(b)
		}
		if b[i] != ',' {
			return in, false
		}
		i = skipJSONSpace(b, i+1)
	}
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanPlainString reads a JSON string without escapes at b[i], returning
// its contents and the index after it.
func scanPlainString(b []byte, i int) (s []byte, end int, ok bool) {
	if i == len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// scanPlainInteger reads a JSON number that is an integer without fraction
// or exponent at b[i], returning the index after it.
func scanPlainInteger(b []byte, i int) (end int, ok bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == start || (b[start] == '0' && i-start > 1) {
		return 0, false
	}
	return i, true
}

// jsonKind names the kind of JSON value that starts with tok.
func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

var errTooLarge = Errorf(CodePayloadTooLarge, "the body must be at most %d bytes", MaxBodyBytes)

func checkContentType(ct string) error {
	if ct == "" {
		return Errorf(CodeUnsupportedMediaType, "Content-Type must be application/json, and the request has none")
	}
	mediaType, _, err := mime.ParseMediaType(ct)
	if err != nil || mediaType != "application/json" {
		return Errorf(CodeUnsupportedMediaType, "Content-Type must be application/json, not %q", ct)
	}
	return nil
}

func tooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}

// jsonError explains why a body is not one JSON object.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	switch {
	case tooLarge(err):
		return errTooLarge
	case errors.Is(err, io.EOF):
		return domain.Malformed("the body is empty; it must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return domain.Malformed("the body ends in the middle of a JSON value")
	case errors.As(err, &syntax):
		return domain.Malformed("the body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(syntax.Error(), "json: "), syntax.Offset)
	}
	return domain.Malformed("the body is not a valid JSON object")
}

func (in newPetBody) validate() (domain.Pet, error) {
	var p domain.Pet
	switch {
	case in.Name == nil:
		return p, domain.Invalid("name is required")
	case string(in.Name) == "null":
		return p, domain.Invalid("name must be a string, not null")
	case !unquote(in.Name, &p.Name):
		return p, domain.Invalid("name must be a string")
	case strings.ContainsRune(p.Name, utf8.RuneError):
		// encoding/json turns invalid UTF-8 and lone surrogates into U+FFFD
		// without a word; a name is text, so say so instead.
		return p, domain.Invalid("name must be valid UTF-8 text (no invalid bytes, lone surrogates or U+FFFD)")
	case strings.TrimSpace(p.Name) == "":
		return p, domain.Invalid("name must not be empty")
	case utf8.RuneCountInString(p.Name) > MaxNameRunes:
		return p, domain.Invalid("name must be at most %d characters", MaxNameRunes)
	case strings.ContainsFunc(p.Name, isControl):
		return p, domain.Invalid("name must not contain control characters")
	}

	var err error
	switch {
	case in.CategoryID == nil:
		return p, domain.Invalid("categoryId is required")
	case string(in.CategoryID) == "null":
		return p, domain.Invalid("categoryId must be an integer, not null")
	}
	if p.CategoryID, err = strconv.ParseInt(string(in.CategoryID), 10, 64); err != nil || p.CategoryID < 1 {
		return p, domain.Invalid("categoryId must be an integer from 1 to %s", maxInt64String)
	}

	if in.Status != nil {
		if string(in.Status) == "null" {
			return p, domain.Invalid("status must be one of available, pending, sold, not null; leave it out to give none")
		}
		if !unquote(in.Status, &p.Status) || !domain.KnownStatus(p.Status) {
			return p, domain.Invalid("status must be one of available, pending, sold")
		}
	}
	return p, nil
}

// unquote sets *s to the string the JSON value raw holds, and reports
// whether it is a string. Without escapes the string is raw's own bytes;
// where encoding/json would turn invalid UTF-8 into U+FFFD, validate
// refuses both alike.
func unquote(raw json.RawMessage, s *string) bool {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		*s = string(raw[1 : len(raw)-1])
		return true
	}
	return json.Unmarshal(raw, s) == nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// RequestHash identifies a createPet request by its meaning, so a retry that
// differs only in spacing or field order is the same request.
func RequestHash(p domain.Pet) []byte {
	h := sha256.Sum256(fmt.Appendf(nil, "%q %d %q", p.Name, p.CategoryID, p.Status))
	return h[:]
}
