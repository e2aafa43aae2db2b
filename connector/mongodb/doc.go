// Package mongodb is the mongodb sink: each write one unordered
// insertMany into a collection, the collection's unique _id index
// absorbing a repeat (see mongoSink), and the unique-index premise the
// compiler's proof may rest on, checked through listIndexes.
//
// It registers the "mongodb" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package mongodb
