package domain

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameLen bounds a name (of a key, of an admin token), in characters.
const maxNameLen = 64

// hiddenCharacters are what a name may not hold: controls (C0 and C1, which
// can move a terminal's cursor or recolour it), format characters (bidi
// overrides, zero-width characters, the BOM, which make a name look like
// another) and the line and paragraph separators.
var hiddenCharacters = []*unicode.RangeTable{unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp}

// CheckName is the rule for a name a person gives something (field says
// where it came from, such as "--name"): printable text, valid UTF-8, at
// most 64 characters, so that keys list, the audit trail and a terminal
// show it as it is. The error names the rule; callers make it a usage
// error or a 400.
func CheckName(field, value string) error {
	const rule = "printable text of at most %d characters (valid UTF-8, no control, format or line-separator characters)"
	// encoding/json turns invalid UTF-8 and lone surrogates into U+FFFD
	// without a word, as /v1 refuses in a pet's name: refused alike.
	if !utf8.ValidString(value) || strings.ContainsRune(value, utf8.RuneError) {
		return fmt.Errorf("%s must be "+rule+": it is not valid UTF-8 (invalid bytes, a lone surrogate or U+FFFD)", field, maxNameLen)
	}
	if n := utf8.RuneCountInString(value); n > maxNameLen {
		return fmt.Errorf("%s must be "+rule+": it has %d", field, maxNameLen, n)
	}
	for _, r := range value {
		if unicode.IsOneOf(hiddenCharacters, r) {
			return fmt.Errorf("%s must be "+rule+": it holds %U", field, maxNameLen, r)
		}
	}
	return nil
}
