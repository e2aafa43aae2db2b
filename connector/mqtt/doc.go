// Package mqtt is the mqtt source and sink, over MQTT 5 with
// github.com/eclipse/paho.golang (MQTT 5 for its user properties, which
// carry a record's message_id, and its manual acknowledgements). As a
// source, a QoS 1 subscription in a persistent session whose PUBACKs are
// sent only once the route has committed past a message (or QoS 0, at
// most once); as a sink, QoS 1 publishes that wait for their PUBACK.
//
// It registers the "mqtt" kind with the runtime in init; a binary that
// runs plans links it with a blank import, as connector/all does.
package mqtt
