package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pglogrepl"
)

// TestIdleNoteVerification: a stream resumed behind the slot accepts only this slot's idle
// note that put the slot there with a base at or before the checkpoint; another slot's notes,
// transactional messages and other prefixes are not its business; anything else decides
// against it.
func TestIdleNoteVerification(t *testing.T) {
	const slot = "s1"
	resume, confirmed := pglogrepl.LSN(0x1000), pglogrepl.LSN(0x9000)
	note := func(n idleNote) []byte {
		b, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := idleNote{Slot: slot, Nonce: "a", Start: confirmed.String(), Base: resume.String()}
	cases := []struct {
		name string
		msg  pglogrepl.LogicalDecodingMessage
		want string // "ok", "behind", "ignored"
	}{
		{"the note that moved the slot", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix, Content: note(good)}, "ok"},
		{"an older base", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix,
			Content: note(idleNote{Slot: slot, Nonce: "a", Start: confirmed.String(), Base: "0/800"})}, "ok"},
		{"a later base: changes after the checkpoint were acknowledged", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix,
			Content: note(idleNote{Slot: slot, Nonce: "a", Start: confirmed.String(), Base: "0/1001"})}, "behind"},
		{"another start", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix,
			Content: note(idleNote{Slot: slot, Nonce: "a", Start: "0/8FFF", Base: resume.String()})}, "behind"},
		{"the probe first", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix,
			Content: note(idleNote{Slot: slot, Nonce: "p", Probe: true})}, "behind"},
		{"another slot's note", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix,
			Content: note(idleNote{Slot: "s2", Nonce: "a", Start: confirmed.String(), Base: "0/5000"})}, "ignored"},
		{"another prefix", pglogrepl.LogicalDecodingMessage{Prefix: "app", Content: note(good)}, "ignored"},
		{"a transactional message", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix, Transactional: true,
			Content: note(idleNote{Slot: slot, Nonce: "p", Probe: true})}, "ignored"},
		{"not JSON", pglogrepl.LogicalDecodingMessage{Prefix: idlePrefix, Content: []byte("x")}, "ignored"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &stream{src: &Source{opts: Options{Slot: slot}}, verified: make(chan error, 1),
				verify: &verifyPlan{resume: resume, confirmed: confirmed}}
			err := st.handleLogicalMessage(context.Background(), &c.msg)
			var got string
			switch {
			case errors.Is(err, ErrCheckpointBehindSlot):
				got = "behind"
			case err != nil:
				t.Fatalf("unexpected error: %v", err)
			case st.verify == nil:
				got = "ok"
				if v := <-st.verified; v != nil {
					t.Fatalf("verified with %v", v)
				}
			default:
				got = "ignored"
			}
			if got != c.want {
				t.Fatalf("%s, want %s", got, c.want)
			}
		})
	}

	// A captured change before the note decides against the checkpoint too.
	st := &stream{src: &Source{opts: Options{Slot: slot}}, verified: make(chan error, 1),
		verify: &verifyPlan{resume: resume, confirmed: confirmed}}
	if err := st.verifyCaptured(); !errors.Is(err, ErrCheckpointBehindSlot) {
		t.Fatalf("captured change while verifying: %v", err)
	}
}
