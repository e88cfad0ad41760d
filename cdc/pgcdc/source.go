package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tributary-dev/tributary/cdc"
)

// Connector is the TableID.Connector of every event of this package.
const Connector = "postgres"

// Table names a captured table exactly as the catalog spells it: no quoting, no case folding.
// A Name of AllTables is a pattern: every table of the schema (see doc.go, Table patterns).
type Table struct {
	Schema string // "public" when empty
	Name   string
}

// AllTables as a Table's Name captures every table of the schema, those it has when Open runs
// and those created later: Table{Schema: "sales", Name: pgcdc.AllTables} is sales.*. A table
// literally named "*" cannot be captured by name.
const AllTables = "*"

// IsPattern reports whether t stands for every table of its schema (Name AllTables).
func (t Table) IsPattern() bool { return t.Name == AllTables }

// Options configure a Source. The zero value works: every field states its default.
type Options struct {
	// Name is the source's name in every TableID. Default "postgres".
	Name string
	// Publication is the pgoutput publication to read. Default "tributary_" + Name (with
	// characters other than [a-z0-9_] replaced by '_').
	Publication string
	// Slot is the logical replication slot: [a-z0-9_], at most 63 characters. Default as
	// Publication.
	Slot string
	// NoCreatePublication makes Open fail when the publication is missing. Default false: a
	// missing publication is created for Tables (FOR TABLES IN SCHEMA for the patterns, FOR
	// TABLE for the other tables, FOR ALL TABLES when Tables is empty), with publish =
	// 'insert, update, delete, truncate'. An existing publication is never altered.
	NoCreatePublication bool
	// NoCreateSlot makes Open fail when the slot is missing. Default false: it is created.
	NoCreateSlot bool
	// Owner names who owns the slot and the publication (package mirror: its deployment and
	// pipeline). When set, Open marks the publication as Owner's, with the slot's name (a
	// COMMENT ON PUBLICATION; doc.go, Ownership): one it creates, and an existing one without
	// a comment (created by hand or by an earlier version). Open and Drop refuse, with
	// ErrOwnedByOther, a publication marked as another owner's and a slot another owner's
	// publication names, so two pipelines never read one slot. Default "": nothing is marked
	// or checked.
	Owner string
	// Tables are the captured tables, each a table or a pattern (Name AllTables: every table
	// of the schema, also those created later; PostgreSQL 15 or later, see doc.go, Table
	// patterns). Default: every table the publication publishes, also those it publishes
	// later. Changes of other tables the publication sends are dropped. Open fails with a
	// *cdc.StartError naming each table or pattern schema that does not exist as spelled
	// (with the name of another case as the fix, when there is one), and each that an
	// existing publication does not publish (a pattern: does not publish as a whole schema).
	Tables []Table
	// Snapshot says what Open does without a checkpoint. Default cdc.SnapshotInitial.
	Snapshot cdc.SnapshotMode
	// SnapshotChunk is how many rows a snapshot reads per query; each chunk's last row carries
	// a checkpoint. Default 1024.
	SnapshotChunk int
	// ResnapshotWait bounds how long a re-snapshot chunk waits for the transactions in
	// progress when its snapshot was taken (doc.go, Re-snapshots); a chunk that waited longer
	// is read again later. Default 10s.
	ResnapshotWait time.Duration
	// StatusInterval is how often the stream reports its acknowledged position to the server
	// even when nothing happens. It must stay well below the server's wal_sender_timeout
	// (default 60s). Default 10s.
	StatusInterval time.Duration
	// IdleCheckpointInterval is how long the stream waits, with every delivered checkpoint
	// acknowledged and no captured change arriving, before it writes a logical decoding
	// message to move the slot's confirmed position past WAL that holds no captured change,
	// so a quiet captured table does not make the server keep other tables' WAL (doc.go, Idle
	// checkpoints). Default 10s; negative turns idle checkpoints off.
	IdleCheckpointInterval time.Duration
	// SlotBusyTimeout is how long a stream retries START_REPLICATION while the slot is still
	// held, as it is for a moment by the exiting walsender of a stream just closed. Default 10s.
	SlotBusyTimeout time.Duration
	// Logger receives operational messages; never row data or credentials. Default: discard.
	Logger *slog.Logger
	// Now is the clock for snapshot progress rates. Default time.Now.
	Now func() time.Time
}

// Source reads one PostgreSQL database's changes through pgoutput. It is safe for concurrent
// use; each Open makes a new stream with its own connections.
type Source struct {
	sqlCfg  *pgx.ConnConfig
	replCfg *pgconn.Config
	opts    Options

	// named are the tables Options.Tables names, patterns the schemas it captures whole;
	// both empty: every table the publication sends is captured.
	named    []Table
	patterns []string

	mu      sync.Mutex
	schemas map[cdc.TableID]*tableInfo // latest catalog schema per table
	// toastWarned: the TOAST warnings logged, per table (its columns and replica identity).
	toastWarned map[string]string

	// open is the stream of the latest Open while it runs, for Lag (caughtUp).
	open atomic.Pointer[stream]

	// marks are the relations that left the captured names or came back (identity.go), as of
	// the event the open stream decodes; marksJSON is their checkpoint encoding. Guarded by
	// relMu; reset by every Open from its checkpoint.
	relMu     sync.Mutex
	marks     map[uint32]relMark
	marksJSON []byte
	// pubAllTables: the publication is FOR ALL TABLES (as of the latest Open).
	pubAllTables atomic.Bool
}

var slotNameRE = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Errors of Open.
var (
	// ErrSlotMissing: the slot does not exist and may not be created, or a checkpoint was given
	// but the slot holding the history after it is gone.
	ErrSlotMissing = errors.New("pgcdc: replication slot missing")
	// ErrPublicationMissing: the publication does not exist and may not be created.
	ErrPublicationMissing = errors.New("pgcdc: publication missing")
	// ErrCheckpointBehindSlot: the checkpoint lies before the slot's confirmed position, so
	// the server already discarded changes the checkpoint still needs (a checkpoint store
	// restored from an old backup, or a slot shared by two pipelines).
	ErrCheckpointBehindSlot = errors.New("pgcdc: checkpoint is behind the slot's confirmed position")
	// ErrOwnedByOther: Options.Owner is set and the publication is marked as another owner's,
	// or another owner's publication names the slot (doc.go, Ownership). The error names the
	// object and its owner; the fix is a slot and a publication of this source's own, never a
	// shared one: two readers of one slot take each other's changes.
	ErrOwnedByOther = errors.New("pgcdc: the slot or publication belongs to another owner")
)

// New returns a Source for the database dsn names (a libpq URL or key=value string; the
// replication connection is the same with replication=database). Nothing connects before
// Open. opts nil means every default; New copies *opts. Errors never contain the password;
// every one is permanent (cdc.IsPermanent).
func New(dsn string, optsIn *Options) (_ *Source, err error) {
	defer func() { err = cdc.Permanent(err) }()
	var opts Options
	if optsIn != nil {
		opts = *optsIn
	}
	sqlCfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: parse DSN: %w", err)
	}
	replCfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: parse DSN: %w", err)
	}
	for k, v := range sessionParams {
		sqlCfg.RuntimeParams[k] = v
		replCfg.RuntimeParams[k] = v
	}
	replCfg.RuntimeParams["replication"] = "database"
	if opts.Name == "" {
		opts.Name = "postgres"
	}
	if opts.Publication == "" {
		opts.Publication = DefaultName(opts.Name)
	}
	if opts.Slot == "" {
		opts.Slot = DefaultName(opts.Name)
	}
	if !slotNameRE.MatchString(opts.Slot) {
		return nil, fmt.Errorf("pgcdc: slot name %q: only [a-z0-9_], 1 to 63 characters", opts.Slot)
	}
	if opts.Snapshot != cdc.SnapshotInitial && opts.Snapshot != cdc.SnapshotNever {
		return nil, fmt.Errorf("pgcdc: unknown snapshot mode %d", opts.Snapshot)
	}
	if opts.SnapshotChunk <= 0 {
		opts.SnapshotChunk = 1024
	}
	if opts.ResnapshotWait <= 0 {
		opts.ResnapshotWait = 10 * time.Second
	}
	if opts.StatusInterval <= 0 {
		opts.StatusInterval = 10 * time.Second
	}
	if opts.IdleCheckpointInterval == 0 {
		opts.IdleCheckpointInterval = 10 * time.Second
	}
	if opts.SlotBusyTimeout <= 0 {
		opts.SlotBusyTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Tables = slices.Clone(opts.Tables)
	src := &Source{sqlCfg: sqlCfg, replCfg: replCfg, opts: opts, schemas: map[cdc.TableID]*tableInfo{}}
	for i := range src.opts.Tables {
		t := &src.opts.Tables[i]
		if t.Schema == "" {
			t.Schema = "public"
		}
		switch {
		case t.Name == "":
			return nil, errors.New("pgcdc: a captured table has no name")
		case t.Schema == AllTables:
			return nil, errors.New("pgcdc: a table pattern names one schema (schema.*), not every schema")
		case t.IsPattern():
			if !slices.Contains(src.patterns, t.Schema) {
				src.patterns = append(src.patterns, t.Schema)
			}
		case !slices.Contains(src.named, *t):
			src.named = append(src.named, *t)
		}
	}
	return src, nil
}

// Name is the source's name, as in every TableID.
func (s *Source) Name() string { return s.opts.Name }

// Slot is the replication slot's name.
func (s *Source) Slot() string { return s.opts.Slot }

// Publication is the publication's name.
func (s *Source) Publication() string { return s.opts.Publication }

// DefaultName is the slot and publication name a Source of that Options.Name uses when
// Options.Slot or Options.Publication is empty: "tributary_" and the name lowercased, with
// every character outside [a-z0-9_] replaced by '_', cut at 50. Two Sources on one database
// therefore need different Names, or a Slot and a Publication of their own (package mirror
// derives its defaults from the pipeline instead: mirror/doc.go, Slot and publication names).
func DefaultName(sourceName string) string { return "tributary_" + sanitize(sourceName) }

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 50 {
		out = out[:50]
	}
	return out
}

// IsCheckpoint says whether cp is a checkpoint of this package (one Open would resume from).
func IsCheckpoint(cp cdc.Checkpoint) bool {
	_, err := decodeCheckpoint(cp)
	return err == nil
}

// quoteIdent quotes a SQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// quoteLiteral quotes a SQL string literal (standard_conforming_strings is on since 9.1).
func quoteLiteral(s string) string { return `'` + strings.ReplaceAll(s, `'`, `''`) + `'` }

func (s *Source) tableID(database string, t Table) cdc.TableID {
	return cdc.TableID{Connector: Connector, Source: s.opts.Name, Database: database, Schema: t.Schema, Table: t.Name}
}

// LoadSchema implements cdc.SchemaLoader: the table's current schema from pg_catalog, cached
// until a relation message or a later load replaces it.
func (s *Source) LoadSchema(ctx context.Context, id cdc.TableID) (*cdc.TableSchema, error) {
	s.mu.Lock()
	ti := s.schemas[id]
	s.mu.Unlock()
	if ti != nil {
		return ti.schema, nil
	}
	conn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ti, err = s.catalog(conn).loadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	s.remember(ti)
	return ti.schema, nil
}

// LoadCurrentSchema implements cdc.CurrentSchemaLoader: the table's schema as the catalog has
// it now (restricted to the columns the publication publishes), whatever the stream has
// decoded; nothing is cached.
func (s *Source) LoadCurrentSchema(ctx context.Context, id cdc.TableID) (*cdc.TableSchema, error) {
	conn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	cat := s.catalog(conn)
	ti, err := cat.loadTable(ctx, id)
	if err != nil {
		return nil, err
	}
	published, err := publishedColumns(ctx, conn, s.opts.Publication, id)
	if err != nil {
		return nil, err
	}
	if ti, err = cat.restrictTo(ctx, ti, published); err != nil {
		return nil, err
	}
	return ti.schema, nil
}

func (s *Source) remember(ti *tableInfo) {
	s.mu.Lock()
	s.schemas[ti.schema.ID] = ti
	s.mu.Unlock()
}

func (s *Source) cached(id cdc.TableID) *tableInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.schemas[id]
}

// slotState is a row of pg_replication_slots.
type slotState struct {
	confirmed, restart pglogrepl.LSN
}

func (s *Source) readSlot(ctx context.Context, conn *pgx.Conn, database string) (*slotState, error) {
	var plugin, db, kind string
	var confirmed, restart *string
	err := conn.QueryRow(ctx, `SELECT coalesce(plugin, ''), coalesce(database::text, ''), slot_type,
		confirmed_flush_lsn::text, restart_lsn::text FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`,
		s.opts.Slot).Scan(&plugin, &db, &kind, &confirmed, &restart)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgcdc: read slot %s: %w", s.opts.Slot, err)
	}
	if kind != "logical" || plugin != "pgoutput" || db != database {
		return nil, cdc.Permanent(fmt.Errorf("pgcdc: slot %s is a %s slot of plugin %q on database %q, want logical pgoutput on %q", s.opts.Slot, kind, plugin, db, database))
	}
	if confirmed == nil || restart == nil {
		return nil, fmt.Errorf("%w: %s has no confirmed or restart position", ErrSlotInvalidated, s.opts.Slot)
	}
	st := &slotState{}
	if st.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
		return nil, fmt.Errorf("pgcdc: slot %s: %w", s.opts.Slot, err)
	}
	if st.restart, err = pglogrepl.ParseLSN(*restart); err != nil {
		return nil, fmt.Errorf("pgcdc: slot %s: %w", s.opts.Slot, err)
	}
	return st, nil
}

// ensurePublication creates the publication when missing (and allowed) and returns the tables
// captured as of Open: each named table of Options.Tables, checked to be published, and every
// published table of a pattern's schema, each such schema checked to be published whole; or,
// without Options.Tables, every published table. An existing publication is never altered
// (doc.go, Table patterns).
func (s *Source) ensurePublication(ctx context.Context, conn *pgx.Conn, database string) ([]Table, error) {
	pub := s.opts.Publication
	var truncates, allTables bool
	err := conn.QueryRow(ctx, `SELECT pubtruncate, puballtables FROM pg_catalog.pg_publication WHERE pubname = $1`, pub).Scan(&truncates, &allTables)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgcdc: read publication: %w", err)
	}
	s.pubAllTables.Store(err == nil && allTables || err != nil && len(s.opts.Tables) == 0)
	if exists := err == nil; exists {
		if !truncates {
			// The server never sends what the publication does not publish: a TRUNCATE of a
			// captured table then leaves the destination with rows the source no longer has.
			s.opts.Logger.Warn("pgcdc: the publication does not publish TRUNCATE; truncated rows stay in the destination", "publication", pub)
		}
		if err := s.checkSchemasPublished(ctx, conn, database, allTables); err != nil {
			return nil, err
		}
	} else if err := s.createPublication(ctx, conn, database); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT schemaname::text, tablename::text FROM pg_catalog.pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2`, pub)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: read publication tables: %w", err)
	}
	var published []Table
	for rows.Next() {
		var t Table
		if err := rows.Scan(&t.Schema, &t.Name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgcdc: read publication tables: %w", err)
		}
		published = append(published, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgcdc: read publication tables: %w", err)
	}
	if len(s.opts.Tables) == 0 {
		return published, nil
	}
	var missing []Table
	for _, t := range s.named {
		if !slices.Contains(published, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return nil, s.notPublished(database, missing)
	}
	out := slices.Clone(s.named)
	for _, t := range published {
		if slices.Contains(s.patterns, t.Schema) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b Table) int {
		if c := strings.Compare(a.Schema, b.Schema); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return slices.Compact(out), nil
}

// createPublication creates the missing publication (unless Options.NoCreatePublication):
// FOR TABLES IN SCHEMA for the patterns, which makes the server publish the tables created
// there later, and FOR TABLE for the named tables outside those schemas; FOR ALL TABLES when
// Options.Tables is empty.
func (s *Source) createPublication(ctx context.Context, conn *pgx.Conn, database string) error {
	pub := s.opts.Publication
	if s.opts.NoCreatePublication {
		return fmt.Errorf("%w: %q", ErrPublicationMissing, pub)
	}
	if len(s.patterns) > 0 {
		v, err := serverVersion(ctx, conn)
		if err != nil {
			return err
		}
		if v < 150000 {
			return s.patternsNeed15(database)
		}
	}
	target := s.publicationTarget()
	_, err := conn.Exec(ctx, "CREATE PUBLICATION "+quoteIdent(pub)+" FOR "+target+" WITH (publish = 'insert, update, delete, truncate')")
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42710") { // another Open won the race
		return fmt.Errorf("pgcdc: create publication %q: %w", pub, err)
	}
	s.opts.Logger.Info("pgcdc: created publication", "publication", pub, "tables", len(s.named), "schemas", len(s.patterns))
	return nil
}

// publicationTarget is what a created publication publishes (after FOR): the patterns' schemas
// whole, and the named tables outside them.
func (s *Source) publicationTarget() string {
	if len(s.opts.Tables) == 0 {
		return "ALL TABLES"
	}
	var parts []string
	if len(s.patterns) > 0 {
		names := make([]string, len(s.patterns))
		for i, sch := range s.patterns {
			names[i] = quoteIdent(sch)
		}
		parts = append(parts, "TABLES IN SCHEMA "+strings.Join(names, ", "))
	}
	var names []string
	for _, t := range s.named {
		if !slices.Contains(s.patterns, t.Schema) {
			names = append(names, quoteIdent(t.Schema)+"."+quoteIdent(t.Name))
		}
	}
	if len(names) > 0 {
		parts = append(parts, "TABLE "+strings.Join(names, ", "))
	}
	return strings.Join(parts, ", ")
}

// serverVersion is the server's server_version_num (150000 for 15.0).
func serverVersion(ctx context.Context, conn *pgx.Conn) (int, error) {
	var v int
	if err := conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&v); err != nil {
		return 0, fmt.Errorf("pgcdc: server version: %w", err)
	}
	return v, nil
}

// Open implements cdc.Source. Without a checkpoint it streams from the slot's confirmed
// position (creating the slot when missing), after an initial snapshot when Options.Snapshot
// is SnapshotInitial; with one it resumes from it (first finishing an interrupted snapshot).
// See doc.go, Resume; its permanent failures are marked (doc.go, Shutdown and failures).
func (s *Source) Open(ctx context.Context, cp cdc.Checkpoint) (_ cdc.Stream, err error) {
	defer func() { err = classify(err) }()
	var resume *decodedCheckpoint
	if cp != nil {
		d, err := decodeCheckpoint(cp)
		if err != nil {
			return nil, err
		}
		resume = &d
	}
	sqlConn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: connect: %w", err)
	}
	replConn, err := pgconn.ConnectConfig(ctx, s.replCfg)
	if err != nil {
		_ = sqlConn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pgcdc: replication connect: %w", err)
	}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = replConn.Close(cctx)
			_ = sqlConn.Close(cctx)
		}
	}()

	var database string
	if err := sqlConn.QueryRow(ctx, `SELECT current_database()`).Scan(&database); err != nil {
		return nil, fmt.Errorf("pgcdc: current database: %w", err)
	}
	if err := s.checkTables(ctx, sqlConn, database); err != nil {
		return nil, err
	}
	if err := s.checkOwner(ctx, sqlConn); err != nil {
		return nil, err
	}
	tables, err := s.ensurePublication(ctx, sqlConn, database)
	if err != nil {
		return nil, err
	}
	if err := s.markOwner(ctx, sqlConn); err != nil {
		return nil, err
	}
	var marks map[uint32]relMark
	if resume != nil {
		marks = resume.marks
	}
	s.resetMarks(marks)
	schemas, toast, err := s.inspect(ctx, sqlConn, database, tables)
	if err != nil {
		return nil, err
	}
	slot, err := s.readSlot(ctx, sqlConn, database)
	if err != nil {
		return nil, err
	}

	p := &plan{database: database, tables: tables, schemas: schemas, toast: toast}
	if resume != nil {
		p.resnap = resume.resnap
	}
	switch {
	case slot == nil && resume != nil:
		return nil, fmt.Errorf("%w: %s is gone, the changes after the checkpoint with it", ErrSlotMissing, s.opts.Slot)
	case slot == nil && s.opts.NoCreateSlot:
		return nil, fmt.Errorf("%w: %s", ErrSlotMissing, s.opts.Slot)
	case slot == nil:
		export := s.opts.Snapshot == cdc.SnapshotInitial
		action := "NOEXPORT_SNAPSHOT"
		if export {
			action = "EXPORT_SNAPSHOT"
		}
		res, err := pglogrepl.CreateReplicationSlot(ctx, replConn, s.opts.Slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: action})
		if err != nil {
			return nil, fmt.Errorf("pgcdc: create slot %s: %w", s.opts.Slot, err)
		}
		if p.start, err = pglogrepl.ParseLSN(res.ConsistentPoint); err != nil {
			return nil, fmt.Errorf("pgcdc: slot consistent point: %w", err)
		}
		if slot, err = s.readSlot(ctx, sqlConn, database); err != nil || slot == nil {
			return nil, fmt.Errorf("pgcdc: read the new slot %s: %v", s.opts.Slot, err)
		}
		s.opts.Logger.Info("pgcdc: created slot", "slot", s.opts.Slot, "consistent_point", p.start.String())
		if export {
			p.snapshot = &snapshotPlan{exported: res.SnapshotName, floor: slot.restart - 1, state: &snapshotState{}}
		}
	case resume != nil && resume.lsn < slot.confirmed && resume.snap == nil:
		// Sound only when an idle note moved the slot (doc.go, Idle checkpoints): the stream
		// checks that before Open returns.
		p.start = slot.confirmed
		p.verify = &verifyPlan{resume: resume.lsn, confirmed: slot.confirmed}
	case resume != nil:
		if resume.lsn < slot.confirmed {
			return nil, fmt.Errorf("%w: checkpoint %s, slot %s confirmed %s", ErrCheckpointBehindSlot, resume.lsn, s.opts.Slot, slot.confirmed)
		}
		p.start = resume.lsn
		if resume.snap != nil {
			p.snapshot = &snapshotPlan{floor: resume.floor, state: resume.snap}
		}
	default:
		p.start = slot.confirmed
		if s.opts.Snapshot == cdc.SnapshotInitial {
			// The slot outlived an earlier run that stored no checkpoint: a fresh snapshot,
			// taken after the slot's confirmed position, is as good (doc.go, Snapshots).
			p.snapshot = &snapshotPlan{floor: slot.restart - 1, state: &snapshotState{}}
		}
	}
	if p.snapshot != nil {
		if err := beginSnapshot(ctx, sqlConn, p.snapshot.exported); err != nil {
			return nil, err
		}
	}
	st := newStream(s, sqlConn, replConn, p)
	s.open.Store(st)
	go st.run()
	if p.verify != nil {
		var verr error
		select {
		case verr = <-st.verified:
		case <-ctx.Done():
			verr = ctx.Err()
		}
		if verr != nil {
			_ = st.Close() // the stream owns both connections now
			return nil, verr
		}
	}
	return st, nil
}

// plan is what Open decided a stream does.
type plan struct {
	database string
	tables   []Table
	schemas  []*cdc.TableSchema // the captured tables as of Open (Tables)
	toast    []ToastTable       // captured tables with TOASTable columns, not REPLICA IDENTITY FULL
	start    pglogrepl.LSN      // stream from here; already confirmed to the server
	snapshot *snapshotPlan      // nil: no snapshot
	verify   *verifyPlan        // set when resuming behind the slot's confirmed position
	resnap   *resnapState       // a re-snapshot the checkpoint says is not done
}

// Drop removes the slot (waiting until no stream uses it) and the publication: what deleting
// the pipeline needs, and what tests clean up with. Missing objects are no error.
//
// With Options.Owner set, Drop refuses (ErrOwnedByOther) a publication marked as another
// owner's and a slot another owner's publication names, dropping neither.
func (s *Source) Drop(ctx context.Context) error {
	if s.opts.Owner != "" {
		sqlConn, err := pgx.ConnectConfig(ctx, s.sqlCfg)
		if err != nil {
			return fmt.Errorf("pgcdc: connect: %w", err)
		}
		err = s.checkOwner(ctx, sqlConn)
		_ = sqlConn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
	}
	conn, err := pgconn.ConnectConfig(ctx, s.replCfg)
	if err != nil {
		return fmt.Errorf("pgcdc: replication connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = pglogrepl.DropReplicationSlot(ctx, conn, s.opts.Slot, pglogrepl.DropReplicationSlotOptions{Wait: true})
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42704") {
		return fmt.Errorf("pgcdc: drop slot %s: %w", s.opts.Slot, err)
	}
	if _, err := conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+quoteIdent(s.opts.Publication)).ReadAll(); err != nil {
		return fmt.Errorf("pgcdc: drop publication: %w", err)
	}
	return nil
}

var (
	_ cdc.Source       = (*Source)(nil)
	_ cdc.SchemaLoader = (*Source)(nil)
	_ cdc.Stream       = (*stream)(nil)
	_ cdc.TableLister  = (*stream)(nil)
)
