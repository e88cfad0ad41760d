package pgcdc

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// SlotInfo is what the server says about the source's slot and publication: what a status
// display shows and what deleting a pipeline checks first (an active slot means a stream --
// a running pipeline -- holds it).
type SlotInfo struct {
	Slot, Publication string
	// SlotExists and PublicationExists say whether they exist in the DSN's database.
	SlotExists, PublicationExists bool
	// Active is set while a replication connection streams from the slot; ActivePID is its
	// walsender's process id.
	Active    bool
	ActivePID int32
	// RestartLSN and ConfirmedLSN are the slot's positions in PostgreSQL's text form ("" when
	// the server reports none); WALStatus is pg_replication_slots.wal_status (reserved,
	// extended, unreserved or lost).
	RestartLSN, ConfirmedLSN, WALStatus string
}

// SlotInfo reads the slot's and the publication's state over a short-lived connection of its
// own; it works whether a stream is open or not. Errors never carry the password.
func (s *Source) SlotInfo(ctx context.Context) (SlotInfo, error) {
	info := SlotInfo{Slot: s.opts.Slot, Publication: s.opts.Publication}
	conn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return info, fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid *int32
	var restart, confirmed, walStatus *string
	err = conn.QueryRow(ctx, `SELECT active, active_pid, restart_lsn::text, confirmed_flush_lsn::text, wal_status
		FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`, s.opts.Slot).
		Scan(&info.Active, &pid, &restart, &confirmed, &walStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return info, fmt.Errorf("pgcdc: reading slot %s: %w", s.opts.Slot, err)
	default:
		info.SlotExists = true
		info.ActivePID, info.RestartLSN, info.ConfirmedLSN, info.WALStatus = deref(pid), deref(restart), deref(confirmed), deref(walStatus)
	}
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)`, s.opts.Publication).
		Scan(&info.PublicationExists)
	if err != nil {
		return info, fmt.Errorf("pgcdc: reading publication %s: %w", s.opts.Publication, err)
	}
	return info, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
