package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzScanNewPet checks the fast reading of a createPet body against the
// token-by-token one: the same pet or the same error for every body, and
// unquote reads each string as encoding/json does.
func FuzzScanNewPet(f *testing.F) {
	for _, body := range []string{
		`{"name":"Rex","categoryId":1}`, `{"name":"Rex","categoryId":1,"status":"sold"}`,
		` {"status":"available" , "categoryId":-0,"name":"a b"}` + "\n", `{"name":"R\"ex","categoryId":1}`,
		`{"name":"Rex","categoryId":01}`, `{"name":"Rex","categoryId":1.5}`, `{"name":"Rex","categoryId":1e2}`,
		`{"name":"Rex","name":"Max","categoryId":1}`, `{"name":"Rex","categoryId":1}x`, `{"name":"Rex","categoryId":1`,
		`{"name":"\xff","categoryId":1}`, `{"name":"\ufffd","categoryId":1}`, `{"name":true,"categoryId":1}`,
		`{"name":"Rex","categoryId":1,}`, `{}`, `{"na\u006de":"Rex","categoryId":1}`, `{"name":"Rex","categoryId":-}`,
	} {
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		want, wantErr := readNewPet(strings.NewReader(body))
		got, gotErr := readSmallNewPet(strings.NewReader(body), int64(len(body)))
		if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("body %q: read whole %+v, %v; token by token %+v, %v", body, got, gotErr, want, wantErr)
		}
		// A body that ends before its declared length, as net/http reads
		// it when the client goes away.
		cut := func() io.Reader { return io.MultiReader(strings.NewReader(body), errorReader{io.ErrUnexpectedEOF}) }
		want, wantErr = readNewPet(cut())
		got, gotErr = readSmallNewPet(cut(), int64(len(body))+3)
		if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("cut body %q: read whole %+v, %v; token by token %+v, %v", body, got, gotErr, want, wantErr)
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(body), &fields) != nil {
			return
		}
		for _, raw := range fields {
			var fast, slow string
			fastOK, slowOK := unquote(raw, &fast), json.Unmarshal(raw, &slow) == nil
			invalid := func(s string) bool { return strings.ContainsRune(s, utf8.RuneError) }
			if fastOK != slowOK || (fast != slow && !(invalid(fast) && invalid(slow))) {
				t.Fatalf("unquote(%q) = %q, %v; encoding/json reads %q, %v", raw, fast, fastOK, slow, slowOK)
			}
		}
	})
}
