package stdlib

import (
	"os"

	"github.com/expr-lang/expr"
)

// Env is the environment every mqb expression and ${…} placeholder is
// compiled against (by the compiler, to type-check) and run against (by the
// runtime, per record). Keep both sides on ExprOptions so they cannot drift.
type Env struct {
	// Payload is the decoded JSON payload (map[string]any for an object),
	// or the line as a string for format = text.
	Payload any `expr:"payload"`
	// Meta is the record's metadata; meta["mqb.id"] is set by `id`.
	Meta map[string]string `expr:"meta"`
	// MessageID is the record's u128 id in UUID form.
	MessageID string `expr:"message_id"`
}

// PerDeliveryFuncs are functions whose value differs on every call, so an
// expression using them is never stable across replays. expr-lang's own
// now() is one of them.
var PerDeliveryFuncs = []string{"now"}

// EnvLookup resolves env("NAME") at run time.
type EnvLookup func(name string) string

// ExprOptions returns the expr-lang options of the mqb environment. lookup
// resolves env("NAME"); nil means os.Getenv.
func ExprOptions(lookup EnvLookup) []expr.Option {
	if lookup == nil {
		lookup = os.Getenv
	}
	return []expr.Option{
		expr.Env(Env{}),
		expr.Function("env", func(params ...any) (any, error) {
			name, _ := params[0].(string)
			return lookup(name), nil
		}, new(func(string) string)),
	}
}
