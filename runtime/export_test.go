package runtime

import "github.com/mqb-dev/mqb/plan"

// What the engine's external tests (package runtime_test, which link the
// connectors runtime cannot import) use of its internals.

// OpenCheckpointStore opens node's checkpoint_store as a route named
// route does.
func OpenCheckpointStore(route string, node *plan.Node, o Options) (checkpointStore, error) {
	return openCheckpointStore(nodeAttrs{route: route, node: node}, &o)
}
