package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/tributary-dev/tributary/cdc"
)

// ErrSlotLost: the server removed WAL the slot still needed (pg_replication_slots.wal_status
// 'lost', after max_slot_wal_keep_size): the changes after the slot's position are gone.
var ErrSlotLost = errors.New("pgcdc: replication slot lost its WAL")

// lagSQL reads the server's current WAL position and the slot's row, if any, in one round trip.
const lagSQL = `SELECT pg_catalog.pg_current_wal_lsn()::text, current_database()::text,
	s.slot_name IS NOT NULL, coalesce(s.slot_type, ''), coalesce(s.plugin::text, ''), coalesce(s.database::text, ''),
	s.restart_lsn::text, s.confirmed_flush_lsn::text, coalesce(s.wal_status, '')
FROM (SELECT 1) AS one LEFT JOIN pg_catalog.pg_replication_slots s ON s.slot_name = $1`

// slotRow is what Lag reads of the slot.
type slotRow struct {
	exists                    bool
	kind, plugin, database    string
	restart, confirmed        *string // restart NULL: the slot lost its WAL; confirmed NULL: being created
	walStatus, wantedDatabase string
}

// Lag implements cdc.LagReporter (doc.go, Lag): how far cp trails the server's current WAL
// position, measured over a short-lived SQL connection of its own, bounded by ctx, whether a
// stream is open or not. A missing slot (with a checkpoint: its history is gone), a slot that
// lost its WAL, a slot of another kind or database, and a checkpoint this package did not write
// are permanent errors (cdc.Permanent). Errors never carry the DSN's password.
func (s *Source) Lag(ctx context.Context, cp cdc.Checkpoint) (cdc.SourceLag, error) {
	var resume *decodedCheckpoint
	if cp != nil {
		d, err := decodeCheckpoint(cp)
		if err != nil {
			return cdc.SourceLag{}, cdc.Permanent(err)
		}
		resume = &d
	}
	conn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return cdc.SourceLag{}, fmt.Errorf("pgcdc: lag: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var head string
	var row slotRow
	err = conn.QueryRow(ctx, lagSQL, s.opts.Slot).Scan(&head, &row.wantedDatabase, &row.exists, &row.kind, &row.plugin,
		&row.database, &row.restart, &row.confirmed, &row.walStatus)
	if err != nil {
		return cdc.SourceLag{}, fmt.Errorf("pgcdc: lag: read the WAL position and slot %s: %w", s.opts.Slot, err)
	}
	h, err := pglogrepl.ParseLSN(head)
	if err != nil {
		return cdc.SourceLag{}, fmt.Errorf("pgcdc: lag: current WAL position: %w", err)
	}
	return s.measureLag(h, &row, resume)
}

// measureLag computes the measurement from what the server said (doc.go, Lag).
func (s *Source) measureLag(head pglogrepl.LSN, row *slotRow, resume *decodedCheckpoint) (cdc.SourceLag, error) {
	lag := cdc.SourceLag{Head: uint64(head), Retained: -1}
	if !row.exists {
		if resume != nil {
			return lag, cdc.Permanent(fmt.Errorf("%w: %s is gone, the changes after the checkpoint with it", ErrSlotMissing, s.opts.Slot))
		}
		return lag, nil // Open creates it; nothing is retained meanwhile
	}
	if row.kind != "logical" || row.plugin != "pgoutput" || row.database != row.wantedDatabase {
		return lag, cdc.Permanent(fmt.Errorf("pgcdc: slot %s is a %s slot of plugin %q on database %q, want logical pgoutput on %q",
			s.opts.Slot, row.kind, row.plugin, row.database, row.wantedDatabase))
	}
	if row.walStatus == "lost" || row.restart == nil {
		return lag, cdc.Permanent(fmt.Errorf("%w: slot %s (wal_status %q): the server no longer holds the changes after its position",
			ErrSlotLost, s.opts.Slot, row.walStatus))
	}
	restart, err := pglogrepl.ParseLSN(*row.restart)
	if err != nil {
		return lag, fmt.Errorf("pgcdc: lag: slot %s restart position: %w", s.opts.Slot, err)
	}
	if row.confirmed == nil {
		// A slot being created: CREATE_REPLICATION_SLOT has reserved WAL and waits for the
		// transactions in progress to end before it has a consistent point. Nothing was
		// applied; what it keeps lies ahead (a long transaction holds the pipeline here).
		lag.Retained = max(int64(head)-int64(restart), 0)
		if resume == nil {
			lag.Bytes = lag.Retained
			return lag, nil
		}
		return lag, fmt.Errorf("pgcdc: lag: slot %s has no confirmed position yet (being created)", s.opts.Slot)
	}
	confirmed, err := pglogrepl.ParseLSN(*row.confirmed)
	if err != nil {
		return lag, fmt.Errorf("pgcdc: lag: slot %s confirmed position: %w", s.opts.Slot, err)
	}
	lag.Retained = max(int64(head)-int64(restart), 0)
	// An open stream that handed out nothing unacknowledged (a snapshot that found nothing,
	// or whose last checkpoint is a snapshot one, included) has passed where it started
	// streaming and the WAL end of every keepalive since.
	var passed uint64
	if st := s.open.Load(); st != nil {
		passed, _ = st.passedAcked()
	}
	switch {
	case resume == nil && passed == 0:
		// No checkpoint: nothing is applied; what the server keeps is what lies ahead.
		lag.Bytes = lag.Retained
		return lag, nil
	case resume == nil:
		lag.Applied = passed
	case resume.snap != nil:
		// A snapshot is applied up to nothing of the stream: it starts at resume.lsn.
		lag.Applied = uint64(resume.lsn)
	default:
		// The slot's confirmed position is the stream's acknowledged checkpoint or a later
		// position an idle note proved free of unacknowledged captured changes: everything
		// captured before it is applied too, though the stored checkpoint stays behind.
		lag.Applied = uint64(max(resume.lsn, confirmed))
		// An open stream that found everything it had received stored, as of a keepalive's
		// WAL end, has passed that position too, though nothing captured moved the checkpoint.
		if st := s.open.Load(); st != nil {
			lag.Applied = max(lag.Applied, st.caughtUp.Load())
		}
	}
	lag.Applied = max(lag.Applied, passed)
	lag.Bytes = max(int64(head)-int64(lag.Applied), 0)
	return lag, nil
}

var _ cdc.LagReporter = (*Source)(nil)
