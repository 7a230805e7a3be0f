package metrics

import (
	"testing"
	"time"
)

// testNames are label names as the root gives them: index 0 is none.
var testNames = Names{
	AuthReasons: []string{"", "missing", "malformed", "invalid"},
	DBCauses:    []string{"", "timeout"},
	Deliveries:  map[string]string{"delivered": "delivered"},
}

const testReasonInvalid = 3

func TestRecordingAnUnsampledRequestAllocatesNothing(t *testing.T) {
	m := New(Build{}, testNames)
	ok := Answered{Pattern: "GET /v1/pets/{petId}", Method: "GET", Code: 200, Took: time.Millisecond, Decision: Allowed}
	m.ObserveRequest(&ok) // the first resolves the series
	if n := testing.AllocsPerRun(1000, func() { m.ObserveRequest(&ok) }); n != 0 {
		t.Errorf("recording a request allocates %v times, want 0", n)
	}
	refused := Answered{Pattern: "GET /v1/pets/{petId}", Method: "GET", Code: 401, Took: time.Millisecond,
		Decision: Allowed, AuthFailure: testReasonInvalid}
	m.ObserveRequest(&refused)
	if n := testing.AllocsPerRun(1000, func() { m.ObserveRequest(&refused) }); n != 0 {
		t.Errorf("recording a 401 allocates %v times, want 0", n)
	}
}

// BenchmarkRecordRequest is what the metrics add to a request.
func BenchmarkRecordRequest(b *testing.B) {
	m := New(Build{}, testNames)
	a := Answered{Pattern: "GET /v1/pets/{petId}", Method: "GET", Code: 200, Took: time.Millisecond, Decision: Allowed}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveRequest(&a)
	}
}
