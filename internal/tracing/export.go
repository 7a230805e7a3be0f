package tracing

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// httpExporter posts spans to an OTLP/HTTP endpoint as protobuf: the
// protocol's own types (go.opentelemetry.io/proto/otlp) filled from the
// SDK's spans. It stands in for otlptracehttp, whose configuration package
// imports gRPC, and with it golang.org/x/net/trace, whose templates keep
// every method of the binary: 17 MB more text for a POST. The body is a
// TracesData, which the protocol makes the same on the wire as the
// collector's ExportTraceServiceRequest.
type httpExporter struct {
	url     string
	headers map[string]string
	client  *http.Client
}

func newHTTPExporter(url string, headers map[string]string) *httpExporter {
	return &httpExporter{url: url, headers: headers, client: &http.Client{Timeout: exportTimeout}}
}

func (e *httpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	body, err := proto.Marshal(tracesData(spans))
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "petstore")
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the OTLP endpoint answered %s", resp.Status)
	}
	return nil
}

func (e *httpExporter) Shutdown(context.Context) error {
	e.client.CloseIdleConnections()
	return nil
}

// tracesData is spans as the protocol sends them: by resource and scope
// (this server's spans share one resource; the scopes are kept apart).
func tracesData(spans []sdktrace.ReadOnlySpan) *tracepb.TracesData {
	if len(spans) == 0 {
		return &tracepb.TracesData{}
	}
	rs := &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(spans[0].Resource().Attributes())},
		SchemaUrl: spans[0].Resource().SchemaURL()}
	scopes := map[string]*tracepb.ScopeSpans{}
	for _, s := range spans {
		scope := s.InstrumentationScope()
		ss := scopes[scope.Name+"\x00"+scope.Version]
		if ss == nil {
			ss = &tracepb.ScopeSpans{Scope: &common.InstrumentationScope{Name: scope.Name, Version: scope.Version}, SchemaUrl: scope.SchemaURL}
			scopes[scope.Name+"\x00"+scope.Version] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, spanOf(s))
	}
	return &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{rs}}
}

func spanOf(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	p := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], TraceState: sc.TraceState().String(), Flags: uint32(sc.TraceFlags()),
		Name: s.Name(), Kind: tracepb.Span_SpanKind(s.SpanKind()),
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()), EndTimeUnixNano: uint64(s.EndTime().UnixNano()),
		Attributes: keyValues(s.Attributes()), DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedLinksCount: uint32(s.DroppedLinks()), DroppedEventsCount: uint32(s.DroppedEvents()),
		Status: &tracepb.Status{Message: s.Status().Description},
	}
	if parent := s.Parent(); parent.IsValid() {
		psid := parent.SpanID()
		p.ParentSpanId = psid[:]
	}
	switch s.Status().Code {
	case codes.Error:
		p.Status.Code = tracepb.Status_STATUS_CODE_ERROR
	case codes.Ok:
		p.Status.Code = tracepb.Status_STATUS_CODE_OK
	}
	for _, l := range s.Links() {
		p.Links = append(p.Links, linkOf(l.SpanContext, l.Attributes))
	}
	for _, ev := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{Name: ev.Name, TimeUnixNano: uint64(ev.Time.UnixNano()), Attributes: keyValues(ev.Attributes)})
	}
	return p
}

func linkOf(sc trace.SpanContext, attrs []attribute.KeyValue) *tracepb.Span_Link {
	tid, sid := sc.TraceID(), sc.SpanID()
	return &tracepb.Span_Link{TraceId: tid[:], SpanId: sid[:], TraceState: sc.TraceState().String(),
		Flags: uint32(sc.TraceFlags()), Attributes: keyValues(attrs)}
}

func keyValues(kvs []attribute.KeyValue) []*common.KeyValue {
	out := make([]*common.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, &common.KeyValue{Key: string(kv.Key), Value: anyValue(kv.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *common.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &common.AnyValue{Value: &common.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &common.AnyValue{Value: &common.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &common.AnyValue{Value: &common.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.BOOLSLICE, attribute.INT64SLICE, attribute.FLOAT64SLICE, attribute.STRINGSLICE:
		return &common.AnyValue{Value: &common.AnyValue_ArrayValue{ArrayValue: &common.ArrayValue{Values: sliceValues(v)}}}
	}
	return &common.AnyValue{Value: &common.AnyValue_StringValue{StringValue: v.Emit()}}
}

func sliceValues(v attribute.Value) []*common.AnyValue {
	var out []*common.AnyValue
	switch v.Type() {
	case attribute.BOOLSLICE:
		for _, b := range v.AsBoolSlice() {
			out = append(out, anyValue(attribute.BoolValue(b)))
		}
	case attribute.INT64SLICE:
		for _, n := range v.AsInt64Slice() {
			out = append(out, anyValue(attribute.Int64Value(n)))
		}
	case attribute.FLOAT64SLICE:
		for _, f := range v.AsFloat64Slice() {
			out = append(out, anyValue(attribute.Float64Value(f)))
		}
	default:
		for _, s := range v.AsStringSlice() {
			out = append(out, anyValue(attribute.StringValue(s)))
		}
	}
	return out
}
