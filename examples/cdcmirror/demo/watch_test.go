package main

import (
	"encoding/json"
	"math/big"
	"testing"
)

// matches is the demo's convergence check: it must tell a stale or leftover document from a
// current one, and not be fooled by how a decimal is spelt.
func TestMatches(t *testing.T) {
	note := "updated"
	r := row{customer: "ada", qty: 7, price: big.NewRat(1245, 100), note: &note}
	doc := func(customer string, qty, price string, note any) map[string]any {
		return map[string]any{"customer": customer, "qty": json.Number(qty), "price": price, "note": note}
	}
	for _, tc := range []struct {
		name    string
		r       row
		present bool
		doc     map[string]any
		want    bool
	}{
		{"equal", r, true, doc("ada", "7", "12.45", "updated"), true},
		{"decimal spelt differently", r, true, doc("ada", "7", "12.450", "updated"), true},
		{"both absent", row{}, false, nil, true},
		{"row deleted, document left", row{}, false, doc("ada", "7", "12.45", "updated"), false},
		{"row present, no document", r, true, nil, false},
		{"stale qty", r, true, doc("ada", "6", "12.45", "updated"), false},
		{"stale price", r, true, doc("ada", "7", "12.44", "updated"), false},
		{"stale customer", r, true, doc("bob", "7", "12.45", "updated"), false},
		{"stale note", r, true, doc("ada", "7", "12.45", nil), false},
		{"note should be null", row{customer: "ada", qty: 7, price: big.NewRat(1245, 100)}, true, doc("ada", "7", "12.45", "x"), false},
	} {
		if got := matches(tc.r, tc.present, tc.doc); got != tc.want {
			t.Errorf("%s: matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}
