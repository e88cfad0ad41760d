package statestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tributary-dev/tributary/statestore"
)

// fence is how a fencing component might keep one destination index's ownership record.
type fence struct {
	Instance string `json:"instance"`
	Current  int    `json:"current"`
	Pending  int    `json:"pending,omitempty"`
}

// Example_fenceRecord shows the compare-and-set loop for a record: read, change, write back
// at the revision read, start over on ErrConflict.
func Example_fenceRecord() {
	ctx := context.Background()
	s := statestore.NewMemory() // statestore.Open(path, nil) for the durable file
	defer s.Close()

	create, _ := json.Marshal(fence{Instance: "a1b2", Current: 1})
	if _, err := s.Put(ctx, "orders-to-es", "esfence", "cdc-shop.orders", create, 0); err != nil {
		panic(err)
	}

	// Announce the next fence before rotating the alias, so a crash in between is recoverable.
	for {
		r, err := s.Get(ctx, "orders-to-es", "esfence", "cdc-shop.orders")
		if err != nil {
			panic(err)
		}
		var f fence
		_ = json.Unmarshal(r.Value, &f)
		f.Pending = f.Current + 1
		next, _ := json.Marshal(f)
		_, err = s.Put(ctx, "orders-to-es", "esfence", "cdc-shop.orders", next, r.Revision)
		if errors.Is(err, statestore.ErrConflict) {
			continue // someone else changed it: read again
		}
		if err != nil {
			panic(err)
		}
		break
	}
	r, _ := s.Get(ctx, "orders-to-es", "esfence", "cdc-shop.orders")
	fmt.Println(string(r.Value))

	// Deleting the pipeline forgets its destinations and resets its checkpoint together.
	_ = s.SaveCheckpoint(ctx, "orders-to-es", []byte("lsn:0/16B3748"))
	_ = s.DeletePipeline(ctx, "orders-to-es")
	cp, _ := s.LoadCheckpoint(ctx, "orders-to-es")
	r, _ = s.Get(ctx, "orders-to-es", "esfence", "cdc-shop.orders")
	fmt.Println(cp == nil, r.Revision == 0)
	// Output:
	// {"instance":"a1b2","current":1,"pending":2}
	// true true
}
