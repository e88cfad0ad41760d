package pgcdc

import "github.com/tributary-dev/tributary/cdc"

// SetWALHook sets (nil: clears) the hook that sees each pgoutput message a stream decodes,
// for TestCaptureFuzzSeeds.
func SetWALHook(h func(wal []byte)) {
	if h == nil {
		walHook.Store(nil)
		return
	}
	walHook.Store(&h)
}

// DecodeFuzzChange decodes a row change message under the table a Relation message
// describes, as FuzzPgoutputChange does.
func DecodeFuzzChange(rel, wal []byte) (before, after []cdc.Value, err error) {
	ti := fuzzTable(rel)
	if ti == nil {
		return nil, nil, errMessageFraming
	}
	fr, err := parseChangeFrame(wal)
	if err != nil {
		return nil, nil, err
	}
	before, after, bad, err := decodeChange(ti, fr)
	if err == nil && bad != nil {
		err = bad
	}
	return before, after, err
}
