package sqlkv

// DurableCommit sets, in params (a PostgreSQL connection's startup
// parameters), a synchronous_commit that flushes a commit to the server's
// WAL on disk before the server answers. mqb counts a record delivered,
// and a dedup key or a position saved, once its transaction's commit
// returns; under synchronous_commit = off (a server's or a database's
// default some set for speed) the server answers first and a crash of it
// loses the last commits it answered. A stronger level the url asks for
// (local, remote_write, remote_apply, on) is kept.
func DurableCommit(params map[string]string) {
	switch params["synchronous_commit"] {
	case "on", "local", "remote_write", "remote_apply":
	default:
		params["synchronous_commit"] = "on"
	}
}
