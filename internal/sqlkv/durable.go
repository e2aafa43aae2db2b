package sqlkv

import (
	"context"

	"github.com/jackc/pgx/v5/pgconn"
)

// durableCommitSQL turns synchronous_commit on for the session when it is
// off, and leaves a level that also flushes (on, local, remote_write,
// remote_apply) as it is.
const durableCommitSQL = `SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') = 'off'`

// DurableCommit makes every PostgreSQL connection made from cfg commit to
// disk before the server answers. mqb counts a record delivered, and a
// dedup key or a position saved, once its transaction's commit returns;
// under synchronous_commit = off (a server's, database's or role's
// default some set for speed) the server answers first, and a crash of
// the server process loses the last commits it answered. The setting is
// made once per connection, after it is made (not as a startup
// parameter, which connection poolers such as PgBouncer refuse); behind a
// pooler in transaction mode a session setting does not follow the
// session, so there set it on the database or the role.
func DurableCommit(cfg *pgconn.Config) {
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgconn.PgConn) error {
		if prev != nil {
			if err := prev(ctx, c); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, durableCommitSQL).ReadAll()
		return err
	}
}
