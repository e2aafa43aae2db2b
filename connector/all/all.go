// Package all links every connector.
// Each connector package registers its kinds with the runtime in init, so
// a binary that runs plans imports this package for its side effects, as
// database/sql drivers are imported:
//
//	import _ "github.com/mqb-dev/mqb/connector/all"
//
// A new connector package is added to the import block below, and only
// here; cmd/mqbc, the benchmarks and the crash helper import this package.
package all

import (
	_ "github.com/mqb-dev/mqb/connector/amqp"        // from amqp, to amqp
	_ "github.com/mqb-dev/mqb/connector/clickhouse"  // to clickhouse
	_ "github.com/mqb-dev/mqb/connector/file"        // from file, to file
	_ "github.com/mqb-dev/mqb/connector/http"        // to http, call http
	_ "github.com/mqb-dev/mqb/connector/httpserver"  // from http_server
	_ "github.com/mqb-dev/mqb/connector/kafka"       // from kafka, to kafka
	_ "github.com/mqb-dev/mqb/connector/mongodb"     // to mongodb
	_ "github.com/mqb-dev/mqb/connector/mqtt"        // from mqtt, to mqtt
	_ "github.com/mqb-dev/mqb/connector/nats"        // from nats, to nats
	_ "github.com/mqb-dev/mqb/connector/objectstore" // from object_store, to object_store
	_ "github.com/mqb-dev/mqb/connector/postgrescdc" // from postgres_cdc
	_ "github.com/mqb-dev/mqb/connector/redis"       // from redis, to redis
	_ "github.com/mqb-dev/mqb/connector/sql"         // from sql, to sql
	_ "github.com/mqb-dev/mqb/connector/stdio"       // from stdin, to stdout
	_ "github.com/mqb-dev/mqb/connector/structural"  // to switch, to fanout, to request
)
