package otlp

import (
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/attribute"
)

// TestValue pins OTLP's JSON mapping of attribute values: 64-bit integers
// as strings, slices as arrayValue.
func TestValue(t *testing.T) {
	tests := []struct {
		v    attribute.Value
		want string
	}{
		{attribute.StringValue("a"), `{"stringValue":"a"}`},
		{attribute.BoolValue(true), `{"boolValue":true}`},
		{attribute.Int64Value(1 << 40), `{"intValue":"1099511627776"}`},
		{attribute.Float64Value(1.5), `{"doubleValue":1.5}`},
		{attribute.BoolSliceValue([]bool{true, false}), `{"arrayValue":{"values":[{"boolValue":true},{"boolValue":false}]}}`},
		{attribute.Int64SliceValue([]int64{3}), `{"arrayValue":{"values":[{"intValue":"3"}]}}`},
		{attribute.Float64SliceValue([]float64{0.5}), `{"arrayValue":{"values":[{"doubleValue":0.5}]}}`},
		{attribute.StringSliceValue([]string{"x", "y"}), `{"arrayValue":{"values":[{"stringValue":"x"},{"stringValue":"y"}]}}`},
		{attribute.StringSliceValue(nil), `{"arrayValue":{"values":[]}}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(value(tc.v))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%v: got %s, want %s", tc.v.String(), b, tc.want)
		}
	}
}
