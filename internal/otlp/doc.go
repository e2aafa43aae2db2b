// Package otlp exports mqb's trace spans over OTLP/HTTP with JSON bodies,
// the encoding every OTLP/HTTP receiver (the OpenTelemetry Collector,
// Jaeger, Tempo…) accepts beside protobuf. It is written against net/http
// instead of the OpenTelemetry project's otlptracehttp exporter because
// that one links the gRPC stack into the binary (its generated collector
// package imports it), which mqb otherwise does without; the spans, their
// batching and the provider are the OpenTelemetry SDK's own.
//
// Tracing is off unless an endpoint is configured: Config reads the
// standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_HEADERS and OTEL_SERVICE_NAME variables, and a flag
// may override the endpoint.
package otlp
