// Package httpserver is the http_server source: an HTTP server whose POST
// requests are records. A request is answered only once the route has
// committed past its record (delivered, filtered, found a repeat or
// dead-lettered), so a 2xx tells the client the record is safe and
// anything else tells it to send the record again: the client's retries
// are the source's replay. The server keeps no position of its own; a
// client that stamps each record with an Idempotency-Key header (reused on
// every retry) gives it an identity a proof may rest on, under the
// producer-id premise, which the source checks per request.
//
// It registers the "http_server" kind with the runtime in init; a binary
// that runs plans links it with a blank import, as connector/all does.
package httpserver
