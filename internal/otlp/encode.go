package otlp

import (
	"encoding/hex"
	"encoding/json"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTLP JSON shapes (opentelemetry-proto's JSON mapping): 64-bit
// integers are strings, trace and span ids are hex, enums are numbers.

type exportRequest struct {
	ResourceSpans []resourceSpans `json:"resourceSpans"`
}

type resourceSpans struct {
	Resource   otlpResource `json:"resource"`
	ScopeSpans []scopeSpans `json:"scopeSpans"`
}

type otlpResource struct {
	Attributes []keyValue `json:"attributes,omitempty"`
}

type scopeSpans struct {
	Scope scope  `json:"scope"`
	Spans []span `json:"spans"`
}

type scope struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

type span struct {
	TraceID           string     `json:"traceId"`
	SpanID            string     `json:"spanId"`
	ParentSpanID      string     `json:"parentSpanId,omitempty"`
	Name              string     `json:"name"`
	Kind              int        `json:"kind"`
	StartTimeUnixNano string     `json:"startTimeUnixNano"`
	EndTimeUnixNano   string     `json:"endTimeUnixNano"`
	Attributes        []keyValue `json:"attributes,omitempty"`
	Events            []event    `json:"events,omitempty"`
	Links             []link     `json:"links,omitempty"`
	Status            *status    `json:"status,omitempty"`
}

type event struct {
	TimeUnixNano string     `json:"timeUnixNano"`
	Name         string     `json:"name"`
	Attributes   []keyValue `json:"attributes,omitempty"`
}

type link struct {
	TraceID    string     `json:"traceId"`
	SpanID     string     `json:"spanId"`
	Attributes []keyValue `json:"attributes,omitempty"`
}

type status struct {
	Message string `json:"message,omitempty"`
	Code    int    `json:"code"`
}

type keyValue struct {
	Key   string   `json:"key"`
	Value anyValue `json:"value"`
}

type anyValue struct {
	StringValue *string     `json:"stringValue,omitempty"`
	BoolValue   *bool       `json:"boolValue,omitempty"`
	IntValue    *string     `json:"intValue,omitempty"`
	DoubleValue *float64    `json:"doubleValue,omitempty"`
	ArrayValue  *arrayValue `json:"arrayValue,omitempty"`
}

type arrayValue struct {
	Values []anyValue `json:"values"`
}

// OTLP's status codes: UNSET 0, OK 1, ERROR 2 (the SDK numbers Error 1
// and Ok 2).
func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	}
	return 0
}

// encode renders spans as one OTLP export request, grouped by resource and
// instrumentation scope.
func encode(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	var req exportRequest
	resIdx := map[string]int{}
	type scopeKey struct {
		res  int
		name string
		vers string
	}
	scopeIdx := map[scopeKey]int{}
	for _, s := range spans {
		rk := ""
		var rattrs []attribute.KeyValue
		if r := s.Resource(); r != nil {
			rk = r.Encoded(attribute.DefaultEncoder())
			rattrs = r.Attributes()
		}
		ri, ok := resIdx[rk]
		if !ok {
			ri = len(req.ResourceSpans)
			resIdx[rk] = ri
			req.ResourceSpans = append(req.ResourceSpans, resourceSpans{Resource: otlpResource{Attributes: keyValues(rattrs)}})
		}
		is := s.InstrumentationScope()
		sk := scopeKey{ri, is.Name, is.Version}
		si, ok := scopeIdx[sk]
		if !ok {
			si = len(req.ResourceSpans[ri].ScopeSpans)
			scopeIdx[sk] = si
			req.ResourceSpans[ri].ScopeSpans = append(req.ResourceSpans[ri].ScopeSpans, scopeSpans{Scope: scope{Name: is.Name, Version: is.Version}})
		}
		ss := &req.ResourceSpans[ri].ScopeSpans[si]
		ss.Spans = append(ss.Spans, encodeSpan(s))
	}
	return json.Marshal(req)
}

func encodeSpan(s sdktrace.ReadOnlySpan) span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := span{
		TraceID:           hex.EncodeToString(tid[:]),
		SpanID:            hex.EncodeToString(sid[:]),
		Name:              s.Name(),
		Kind:              int(s.SpanKind()),
		StartTimeUnixNano: strconv.FormatInt(s.StartTime().UnixNano(), 10),
		EndTimeUnixNano:   strconv.FormatInt(s.EndTime().UnixNano(), 10),
		Attributes:        keyValues(s.Attributes()),
	}
	if p := s.Parent(); p.IsValid() {
		pid := p.SpanID()
		out.ParentSpanID = hex.EncodeToString(pid[:])
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, event{
			TimeUnixNano: strconv.FormatInt(e.Time.UnixNano(), 10),
			Name:         e.Name,
			Attributes:   keyValues(e.Attributes),
		})
	}
	for _, l := range s.Links() {
		lt, ls := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, link{
			TraceID:    hex.EncodeToString(lt[:]),
			SpanID:     hex.EncodeToString(ls[:]),
			Attributes: keyValues(l.Attributes),
		})
	}
	if st := s.Status(); st.Code != codes.Unset {
		out.Status = &status{Code: statusCode(st.Code), Message: st.Description}
	}
	return out
}

func keyValues(kvs []attribute.KeyValue) []keyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]keyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, keyValue{Key: string(kv.Key), Value: value(kv.Value)})
	}
	return out
}

func value(v attribute.Value) anyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return anyValue{BoolValue: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return anyValue{IntValue: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return anyValue{DoubleValue: &f}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), attribute.StringValue)
	}
	s := v.String()
	return anyValue{StringValue: &s}
}

// array encodes a slice attribute as an OTLP arrayValue of its elements.
func array[T any](xs []T, mk func(T) attribute.Value) anyValue {
	a := arrayValue{Values: make([]anyValue, 0, len(xs))}
	for _, x := range xs {
		a.Values = append(a.Values, value(mk(x)))
	}
	return anyValue{ArrayValue: &a}
}
