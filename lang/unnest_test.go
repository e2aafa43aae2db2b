package lang

import "testing"

// TestUnnestArg reads the forms after a key unnest: a path with or
// without `as NAME` is an UnnestArg; anything else stays the item's
// argument, which the checker refuses.
func TestUnnestArg(t *testing.T) {
	cases := []struct {
		line       string
		path, as   string // want; path "" means no UnnestArg
		itemsAfter int    // items of the block after the unnest one
	}{
		{"unnest payload.items as item", "payload.items", "item", 0},
		{"unnest payload.items", "payload.items", "", 0},
		{`unnest payload.order["line items"]`, `payload.order["line items"]`, "", 0},
		{"unnest payload.items as item  # note", "payload.items", "item", 0},
		{"unnest payload.items as", "payload.items", "", 1},
		{"unnest payload.items as item, x = 1", "payload.items", "item", 1},
		{"unnest payload.items x", "payload.items", "", 1},
		{"unnest payload.items + 1", "", "", 0},
		{"unnest", "", "", 0},
	}
	for _, c := range cases {
		src := "route r {\n  " + c.line + "\n}\n"
		f, diags := Parse("u.mqb", []byte(src))
		if diags.HasErrors() {
			t.Errorf("%q: %v", c.line, diags)
			continue
		}
		items := f.Decls[0].Route.Body.Items()
		u := items[0].Unnest
		switch {
		case c.path == "" && u != nil:
			t.Errorf("%q: read as unnest %s, want no UnnestArg", c.line, u.Text())
		case c.path == "":
		case u == nil:
			t.Errorf("%q: no UnnestArg", c.line)
		case u.PathText() != c.path || (u.As == nil) != (c.as == "") || u.As != nil && u.As.Name != c.as:
			t.Errorf("%q: read unnest %s, want %s as %q", c.line, u.Text(), c.path, c.as)
		}
		if got := len(items) - 1; got != c.itemsAfter {
			t.Errorf("%q: %d items after the unnest, want %d", c.line, got, c.itemsAfter)
		}
	}
}
