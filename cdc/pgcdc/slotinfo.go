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

// TakeSlot ends the stream of another reader holding the source's slot, if any: it terminates
// that reader's walsender (pg_terminate_backend) and returns its process id (0 when the slot
// was free or does not exist). An active/standby deployment's new active calls it once it
// holds the pipeline's lease: the old active is fenced by then, and a paused or partitioned
// one would otherwise keep the slot until wal_sender_timeout. Terminating another role's
// backend needs that role's membership, pg_signal_backend or a superuser; the walsender of
// the same user (the usual deployment) needs nothing more. It opens a short-lived connection
// of its own; errors never carry the password.
func (s *Source) TakeSlot(ctx context.Context) (int32, error) {
	conn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return 0, fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var pid *int32
	var ok *bool
	err = conn.QueryRow(ctx, `SELECT active_pid, pg_terminate_backend(active_pid)
		FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database() AND active AND active_pid IS NOT NULL`, s.opts.Slot).
		Scan(&pid, &ok)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("pgcdc: ending the stream holding slot %s: %w", s.opts.Slot, err)
	case ok == nil || !*ok:
		// pg_terminate_backend returns false when the process is already gone.
		return 0, nil
	}
	return deref(pid), nil
}
