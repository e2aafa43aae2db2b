// Package httpserver is the http_server source: an HTTP server whose POST
// requests are records. A request is answered only once the route has
// committed past its record (delivered, filtered, found a repeat or
// dead-lettered), so a 2xx tells the client the record is safe and
// anything else tells it to send the record again: the client's retries
// are the source's replay. The server keeps no position of its own; a
// client that stamps each record with an Idempotency-Key header (reused on
// every retry) gives it an identity a proof may rest on, under the
// producer-id premise, which the source checks per request. Under
// request_reply the source is a runtime.Replier: the engine hands it each
// delivered record's final payload before acking it, and the answer
// (200 with that payload instead of 204) still waits for the commit.
//
// It registers the "http_server" kind with the runtime in init; a binary
// that runs plans links it with a blank import, as connector/all does.
package httpserver
