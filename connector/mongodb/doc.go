// Package mongodb is the mongodb sink: each write one unordered
// insertMany into a collection, the collection's unique _id index
// absorbing a repeat (see mongoSink), and the unique-index premise the
// compiler's proof may rest on, checked through listIndexes; and the
// mongodb capture source: a collection read in _id order, then polled for
// documents with greater _ids, its position the last committed _id (see
// mongoSource).
//
// It registers the "mongodb" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package mongodb
