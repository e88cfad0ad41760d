package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
)

// markPrefix starts the comment that marks a publication as an owner's (Options.Owner; doc.go,
// Ownership); a JSON ownerMark follows it.
const markPrefix = "tributary-owner "

// ownerMark is what a publication's mark says: whose it is, and the slot read with it.
type ownerMark struct {
	Owner string `json:"owner"`
	Slot  string `json:"slot"`
}

func (m ownerMark) comment() string {
	b, _ := json.Marshal(m) // two strings: never fails
	return markPrefix + string(b)
}

// parseMark reads a publication's comment; ok is false for no comment or one that is not a
// mark (a comment of the user's).
func parseMark(comment string) (m ownerMark, ok bool) {
	rest, found := strings.CutPrefix(comment, markPrefix)
	if !found || json.Unmarshal([]byte(rest), &m) != nil || m.Owner == "" {
		return ownerMark{}, false
	}
	return m, true
}

// ownershipFix is the fix of an ErrOwnedByOther refusal: never a shared slot or publication.
const ownershipFix = "give this source a slot and a publication of its own (other names for both; package mirror: " +
	"source slot: and publication:); never add its tables to the other's publication: two readers of one slot take each other's changes"

// checkOwner refuses (ErrOwnedByOther) the publication when it is marked as another owner's,
// and the slot when another owner's publication names it. Nothing is checked without
// Options.Owner.
func (s *Source) checkOwner(ctx context.Context, conn *pgx.Conn) error {
	if s.opts.Owner == "" {
		return nil
	}
	rows, err := conn.Query(ctx, `SELECT pubname::text, coalesce(obj_description(oid, 'pg_publication'), '')
		FROM pg_catalog.pg_publication ORDER BY 1`)
	if err != nil {
		return fmt.Errorf("pgcdc: read publications: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, comment string
		if err := rows.Scan(&name, &comment); err != nil {
			return fmt.Errorf("pgcdc: read publications: %w", err)
		}
		m, ok := parseMark(comment)
		if !ok || m.Owner == s.opts.Owner {
			continue
		}
		switch {
		case name == s.opts.Publication:
			return cdc.Permanent(fmt.Errorf("%w: publication %s belongs to %s (fix: %s)", ErrOwnedByOther, name, m.Owner, ownershipFix))
		case m.Slot == s.opts.Slot:
			return cdc.Permanent(fmt.Errorf("%w: slot %s is read by %s, with publication %s (fix: %s)", ErrOwnedByOther, m.Slot, m.Owner, name, ownershipFix))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgcdc: read publications: %w", err)
	}
	return nil
}

// markOwner marks the publication as Options.Owner's, with the slot's name, unless it is
// already or carries a comment of the user's (left alone: then nothing marks it). A server
// that refuses the comment (the publication is another role's) costs only the mark: logged.
func (s *Source) markOwner(ctx context.Context, conn *pgx.Conn) error {
	if s.opts.Owner == "" {
		return nil
	}
	pub := s.opts.Publication
	var comment string
	err := conn.QueryRow(ctx, `SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_catalog.pg_publication
		WHERE pubname = $1`, pub).Scan(&comment)
	if err != nil {
		return fmt.Errorf("pgcdc: read publication %s: %w", pub, err)
	}
	want := ownerMark{Owner: s.opts.Owner, Slot: s.opts.Slot}
	m, ok := parseMark(comment)
	switch {
	case ok && m == want:
		return nil
	case !ok && comment != "":
		s.opts.Logger.Info("pgcdc: the publication has a comment of its own, so it is not marked as this source's", "publication", pub)
		return nil
	}
	_, err = conn.Exec(ctx, "COMMENT ON PUBLICATION "+quoteIdent(pub)+" IS "+quoteLiteral(want.comment()))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		s.opts.Logger.Warn("pgcdc: not allowed to mark the publication as this source's (the publication is another role's)", "publication", pub)
		return nil
	}
	if err != nil {
		return fmt.Errorf("pgcdc: mark publication %s: %w", pub, err)
	}
	if !ok {
		s.opts.Logger.Info("pgcdc: marked the publication as this source's", "publication", pub, "slot", s.opts.Slot)
	}
	return nil
}
