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

// MapOrderFuncs list a map's entries in Go's map iteration order, which
// changes from run to run: a value built from them is per-delivery unless
// an order-blind function (sort, len, count, …) consumes the list.
var MapOrderFuncs = []string{"keys", "values", "toPairs"}

// DeterministicFuncs is the allow-list of functions that give the same
// value for the same arguments: an expression is stable only when every
// function it calls is here (or is one of MapOrderFuncs, consumed in an
// order-blind way) and its arguments are stable. The value is empty, or
// says what makes the function stable within one process only; a key
// depending on one of those gets a warning. Anything else, expr-lang
// builtins added by a later version included, is per-delivery until it is
// reviewed and added here.
var DeterministicFuncs = map[string]string{
	// mqb's own
	"env": "env(\"NAME\") is read from the process environment",
	// expr-lang builtins
	"all": "", "none": "", "any": "", "one": "", "filter": "", "map": "", "find": "",
	"findIndex": "", "findLast": "", "findLastIndex": "", "count": "", "sum": "",
	"groupBy": "", "sortBy": "", "reduce": "", "len": "", "type": "", "abs": "",
	"ceil": "", "floor": "", "round": "", "int": "", "float": "", "string": "",
	"trim": "", "trimPrefix": "", "trimSuffix": "", "upper": "", "lower": "",
	"split": "", "splitAfter": "", "replace": "", "repeat": "", "join": "",
	"indexOf": "", "lastIndexOf": "", "hasPrefix": "", "hasSuffix": "", "max": "",
	"min": "", "mean": "", "median": "", "toJSON": "", "fromJSON": "", "toBase64": "",
	"fromBase64": "", "duration": "", "first": "", "last": "", "get": "", "take": "",
	"fromPairs": "", "reverse": "", "uniq": "", "concat": "", "flatten": "", "sort": "",
	"bitand": "", "bitor": "", "bitxor": "", "bitnand": "", "bitshl": "", "bitshr": "",
	"bitushr": "", "bitnot": "",
	"date":     "date() without a time zone argument reads the process's local time zone",
	"timezone": "timezone() reads the process's time zone database",
}

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
