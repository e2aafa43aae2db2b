// Package http is the http sink: each record one POST or PUT to a url
// rendered per record (see httpSink for the whole behaviour), and, as a
// request step's call, the response as the record's answer.
//
// It registers the "http" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does. The
// package is named after the kind, so it imports net/http as nethttp.
package http
