package appendjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzAppendJSONString checks the hand-written JSON string encoder every
// response body goes through: valid JSON that encoding/json reads back as
// the input, with invalid UTF-8 as U+FFFD just as encoding/json does, with
// no raw control character, U+2028 or U+2029, the same for string and
// []byte, and appended after what the buffer held.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{
		"", "Rex", `"quoted" \back\slash/`, "\x00\x01\x1f\x7f\b\f\n\r\t", "\u2028\u2029", "<html>&amp;",
		"é😀", "\xff", "\xed\xa0\x80", "\xf4\x90\x80\x80", "a\xc3", "\xe2\x80", "\xef\xbf\xbd", "\xc0\x80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(nil, s)
		if !json.Valid(out) {
			t.Fatalf("appendJSONString(%q) = %s, not valid JSON", s, out)
		}
		if !utf8.Valid(out) || bytes.ContainsFunc(out, func(r rune) bool { return r < 0x20 || r == '\u2028' || r == '\u2029' }) {
			t.Fatalf("appendJSONString(%q) = %q holds invalid UTF-8, a control character, U+2028 or U+2029", s, out)
		}
		var got, want string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s: %v", s, out, err)
		}
		ref, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("appendJSONString(%q) = %s reads as %q; encoding/json gives %q", s, out, got, want)
		}
		if b := String(nil, []byte(s)); !bytes.Equal(b, out) {
			t.Fatalf("appendJSONString of %q as []byte = %s, as string %s", s, b, out)
		}
		if b := String([]byte(`{"x":`), s); string(b) != `{"x":`+string(out) {
			t.Fatalf("appendJSONString after a prefix = %s, want {\"x\":%s", b, out)
		}
	})
}
