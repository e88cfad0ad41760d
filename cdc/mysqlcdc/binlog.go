package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// reader turns binlog events into cdc events. All state is owned by the stream's goroutine.
type reader struct {
	st      *stream
	src     *Source
	cat     *catalog
	useGTID bool

	tables      map[TableName]*table // schemas as of the binlog's current point
	known       map[TableName]bool   // captured tables met so far (those of Open included)
	projections map[string]*table    // schemas rebuilt for row images older than the catalog
	rel         relations            // relation identities and names across DDL (schemaevents.go)
	charsets    collations           // the server's collation ids, read on first need (collations.go)
	// warnedCollation: the tables whose unknown collations were logged (bounded).
	warnedCollation map[string]bool

	// Commit point: where the next transaction starts.
	file      string
	pos       uint32
	mariaGTID map[uint32]mysql.MariadbGTID // MariaDB: last GTID per domain
	mysqlGTID mysql.GTIDSet                // MySQL: executed set

	// The binlog file being read (from rotate events).
	curFile string

	// The open transaction.
	inTx       bool
	standalone bool // MariaDB DDL and other statements that commit without an XID
	txID       string
	txGTID     mysql.MariadbGTID
	txMySQL    string
	txTime     time.Time
	txGTIDText string // txGTID as text, made once per transaction
	txRows     int    // row changes so far, captured or not: the GTID version ordinal
	// held is the latest event (when holding), held until we know whether it ends the
	// transaction; kept by value, since a pointer would cost an allocation per event.
	held    cdc.Event
	holding bool

	// The binlog index of indexedFile, the file last versioned (a pointer: nil until then).
	indexedFile string
	curIndex    *uint64

	// Re-snapshots (resnap_stream.go): the resnapper once a job exists, the signal rows of the
	// open transaction.
	rs           *resnapper
	txSignals    []signalRow
	warnedSignal bool

	domain          uint32
	domainSeen      bool
	warnedDomain    bool
	warnedWidth     bool
	warnedStatement bool
}

func newReader(st *stream) *reader {
	return &reader{
		st: st, src: st.src, cat: &catalog{src: st.src},
		useGTID:     st.src.opts.Positioning == PositionGTID,
		tables:      map[TableName]*table{},
		known:       map[TableName]bool{},
		projections: map[string]*table{},
		rel:         newRelations(),
		mariaGTID:   map[uint32]mysql.MariadbGTID{},
	}
}

// startAt sets the commit point the binlog is read from.
func (r *reader) startAt(c checkpoint) error {
	r.file, r.pos, r.curFile = c.File, c.Pos, c.File
	if !r.useGTID {
		return nil
	}
	if r.src.opts.Flavor == MySQL {
		set, err := mysql.ParseMysqlGTIDSet(c.GTID)
		if err != nil {
			return fmt.Errorf("mysqlcdc: GTID set of the checkpoint: %w", err)
		}
		r.mysqlGTID = set
		return nil
	}
	for _, part := range strings.Split(c.GTID, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		g, err := mysql.ParseMariadbGTID(part)
		if err != nil {
			return fmt.Errorf("mysqlcdc: GTID position %q: %w", part, err)
		}
		r.mariaGTID[g.DomainID] = *g
	}
	return nil
}

// gtidPos renders the commit point's GTID set as the server spells it.
func (r *reader) gtidPos() string {
	if r.src.opts.Flavor == MySQL {
		if r.mysqlGTID == nil {
			return ""
		}
		return r.mysqlGTID.String()
	}
	if len(r.mariaGTID) == 1 { // the usual single domain: no sorting, no joining
		for _, g := range r.mariaGTID {
			return gtidText(g)
		}
	}
	domains := make([]uint32, 0, len(r.mariaGTID))
	for d := range r.mariaGTID {
		domains = append(domains, d)
	}
	sort.Slice(domains, func(i, j int) bool { return domains[i] < domains[j] })
	parts := make([]string, len(domains))
	for i, d := range domains {
		parts[i] = gtidText(r.mariaGTID[d])
	}
	return strings.Join(parts, ",")
}

func (r *reader) checkpoint() cdc.Checkpoint {
	c := checkpoint{File: r.file, Pos: r.pos, UseGTID: r.useGTID}
	if r.useGTID {
		c.GTID = r.gtidPos()
	}
	if r.rs != nil {
		c.Resnap = r.resnapAt()
	}
	return c.encode()
}

// preload loads the schemas of the captured tables that exist now, and remembers them as
// known: a captured table first met later is logged when it appears.
func (r *reader) preload(ctx context.Context, tables []TableName) error {
	fold, err := r.cat.foldsNames(ctx)
	if err != nil {
		return err
	}
	r.rel.fold = fold
	for _, name := range tables {
		r.known[name] = true
		t, err := r.cat.load(ctx, r.src.tableID(name))
		if errors.Is(err, errNoTable) {
			continue // dropped since it was listed
		}
		if err != nil {
			return err
		}
		r.adopt(name, t)
		r.tables[name] = t
	}
	return nil
}

// run reads the binlog over one connection until ctx ends (nil) or the connection fails. A
// failure ends the stream: the caller (a cdc.Runner) reopens it from its last checkpoint, and
// a transaction the failure cut off is then read again from its start, its events delivered
// again with the same versions.
func (r *reader) run(ctx context.Context) error {
	err := r.stream(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// stream reads the binlog over one connection. Every blocking step is bounded: the
// registration by ConnectTimeout and the read timeout, each read by the read timeout (three
// heartbeat periods: the server sends a heartbeat whenever the binlog is idle for one), and
// ending by closing the sockets, so that neither a hung server nor Close can hold it.
func (r *reader) stream(ctx context.Context) error {
	o := r.src.opts
	socks := &sockets{timeout: o.ConnectTimeout}
	readTimeout := 3 * o.Heartbeat
	syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{
		ServerID:                o.ServerID,
		Flavor:                  string(o.Flavor),
		Host:                    r.src.host,
		Port:                    r.src.port,
		User:                    r.src.user,
		Password:                r.src.password,
		TimestampStringLocation: time.UTC,
		HeartbeatPeriod:         o.Heartbeat,
		ReadTimeout:             readTimeout,
		DisableRetrySync:        true, // one connection per stream: the runner reopens
		VerifyChecksum:          true,
		RowsEventDecodeFunc:     deferRows, // images are decoded by the reader (rowsdecode.go)
		Logger:                  libraryLogger(r.src.log),
		Dialer:                  socks.dial,
	})
	defer func() {
		// No new connection: Close's KILL is skipped, its reader ends within its 100 ms
		// deadline. Then the sockets go, in case Close left one.
		socks.refuse()
		syncer.Close()
		socks.closeAll()
	}()

	r.inTx, r.held, r.holding = false, cdc.Event{}, false
	r.curFile = r.file
	// Registration is synchronous and watches no context: ctx ends it by closing its socket.
	stop := context.AfterFunc(ctx, socks.closeAll)
	var streamer *replication.BinlogStreamer
	var err error
	if r.useGTID {
		var set mysql.GTIDSet
		if set, err = mysql.ParseGTIDSet(string(o.Flavor), r.gtidPos()); err == nil {
			streamer, err = syncer.StartSyncGTID(set)
		}
	} else {
		streamer, err = syncer.StartSync(mysql.Position{Name: r.file, Pos: r.pos})
	}
	stop()
	if err != nil {
		return &binlogError{op: "start binlog stream", err: err}
	}
	// Where it starts is passed: what lies before it was delivered (a snapshot) or stored.
	r.st.passed(r.file, r.pos)
	for {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			// go-mysql keeps only the text of the socket's error (around driver.ErrBadConn).
			if errors.Is(err, os.ErrDeadlineExceeded) || strings.Contains(err.Error(), "i/o timeout") {
				return &binlogError{err: fmt.Errorf("no event and no heartbeat from the server for %v, the connection is taken for dead: %w", readTimeout, err)}
			}
			return &binlogError{err: err}
		}
		if err := r.handle(ctx, ev); err != nil {
			return err
		}
	}
}

// eventHook, when set, sees each binlog event before a reader handles it. Only tests set it
// (TestCaptureFuzzSeeds records the raw bytes of the events a stream decodes as fuzz seeds);
// a stream costs one atomic load per event for it.
var eventHook atomic.Pointer[func(*replication.BinlogEvent)]

func (r *reader) handle(ctx context.Context, ev *replication.BinlogEvent) error {
	if h := eventHook.Load(); h != nil {
		(*h)(ev)
	}
	switch e := ev.Event.(type) {
	case *replication.RotateEvent:
		r.curFile = string(e.NextLogName)
		if !r.inTx {
			r.file, r.pos = r.curFile, uint32(e.Position)
		}
	case *replication.MariadbGTIDEvent:
		if err := r.flushOrphan(ctx); err != nil {
			return err
		}
		r.begin(ev.Header)
		r.txGTID = e.GTID
		r.txID = gtidText(e.GTID)
		r.txGTIDText = r.txID
		r.standalone = e.IsStandalone()
		r.checkDomain(e.GTID.DomainID)
	case *replication.GTIDEvent:
		if err := r.flushOrphan(ctx); err != nil {
			return err
		}
		r.begin(ev.Header)
		if next, err := e.GTIDNext(); err == nil {
			r.txMySQL = next.String()
			r.txID = r.txMySQL
		}
		if t := e.ImmediateCommitTime(); !t.IsZero() && e.ImmediateCommitTimestamp != 0 {
			r.txTime = t
		}
	case *replication.QueryEvent:
		return r.query(ctx, ev, e)
	case *replication.XIDEvent:
		return r.commit(ctx, ev.Header)
	case *replication.RowsEvent:
		return r.rows(ctx, ev.Header, e)
	default:
		// An event outside any transaction that the binlog holds (a new file's header after a
		// rotation: format description, GTID list, binlog checkpoint) is passed like a
		// transaction of other tables: without it an idle pipeline after a rotation (FLUSH
		// LOGS, a server restart) would look ever further behind (Lag).
		if !r.inTx && !r.holding && ev.Header.LogPos > 0 && ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F == 0 &&
			ev.Header.EventType != replication.HEARTBEAT_EVENT && ev.Header.EventType != replication.HEARTBEAT_LOG_EVENT_V2 {
			r.st.passed(r.curFile, ev.Header.LogPos)
		}
	}
	return nil
}

// flushOrphan sends a held event whose transaction ended without a commit event this reader
// understood (it should not happen): delivering it without a checkpoint beats losing it.
func (r *reader) flushOrphan(ctx context.Context) error {
	if !r.holding {
		return nil
	}
	r.src.log.Warn("mysqlcdc: a transaction ended without a recognized commit event",
		"source", r.src.opts.SourceName, "position", r.held.Position.String())
	ev := r.held
	r.held, r.holding = cdc.Event{}, false
	return r.st.send(ctx, ev)
}

func (r *reader) begin(h *replication.EventHeader) {
	r.inTx, r.standalone = true, false
	r.txID, r.txMySQL, r.txGTID, r.txGTIDText = "", "", mysql.MariadbGTID{}, ""
	r.txTime = time.Unix(int64(h.Timestamp), 0).UTC()
	r.txRows = 0
	r.held, r.holding = cdc.Event{}, false
	r.txSignals = nil
}

// checkDomain warns once when a second MariaDB GTID domain appears: sequence numbers of
// different domains do not order against each other.
func (r *reader) checkDomain(d uint32) {
	if !r.domainSeen {
		r.domain, r.domainSeen = d, true
		return
	}
	if d != r.domain && r.useGTID && !r.warnedDomain {
		r.warnedDomain = true
		r.src.log.Warn("mysqlcdc: transactions of several GTID domains; versions are only ordered within one domain",
			"source", r.src.opts.SourceName, "domains", []uint32{r.domain, d})
	}
}

func (r *reader) query(ctx context.Context, ev *replication.BinlogEvent, e *replication.QueryEvent) error {
	q := strings.TrimSpace(string(e.Query))
	word := strings.ToUpper(firstWord(q))
	switch word {
	case "BEGIN", "XA":
		if !r.inTx {
			r.begin(ev.Header)
		}
		if r.txID == "" {
			r.txID = fmt.Sprintf("%s:%d", r.curFile, ev.Header.LogPos-ev.Header.EventSize)
		}
		return nil
	case "COMMIT", "ROLLBACK":
		if strings.HasPrefix(strings.ToUpper(q), "ROLLBACK TO") {
			return nil
		}
		return r.commit(ctx, ev.Header)
	case "SAVEPOINT", "RELEASE":
		return nil
	}
	if isDDL(word) {
		if !r.inTx {
			r.begin(ev.Header)
		}
		switch word {
		case "TRUNCATE":
			if err := r.truncate(ctx, ev.Header, e, q); err != nil {
				return err
			}
		default:
			if err := r.schemaDDL(ctx, ev.Header, e, q); err != nil {
				return err
			}
		}
		// The next row of any table is read with a fresh catalog schema. Cheaper than parsing
		// the statement for table names, and DDL is rare.
		r.ddlOnWindow(q)
		clear(r.tables)
		clear(r.projections)
	}
	if isDML(word) && !r.warnedStatement {
		// Open refuses a server whose global binlog_format is not ROW, but a session may
		// still log its changes as statements: they carry no rows, so they are not captured.
		r.warnedStatement = true
		r.src.log.Warn("mysqlcdc: a data change is logged as a statement (a session with binlog_format STATEMENT or MIXED); "+
			"the rows it changed are not captured", "source", r.src.opts.SourceName, "database", string(e.Schema),
			"file", r.curFile, "pos", ev.Header.LogPos)
	}
	if !r.inTx || r.standalone || isDDL(word) && !r.ddlInTransaction(word, q) {
		if !r.inTx {
			r.begin(ev.Header)
		}
		return r.commit(ctx, ev.Header)
	}
	return nil
}

// ddlInTransaction says whether a DDL statement is part of a transaction that a commit event
// ends, rather than its own: a CREATE TABLE ... SELECT, whose rows follow it (MariaDB: a GTID
// without the standalone flag; MySQL 8: the statement ends with START TRANSACTION).
func (r *reader) ddlInTransaction(word, q string) bool {
	if word != "CREATE" || !r.inTx {
		return false
	}
	if r.src.opts.Flavor == MariaDB {
		return r.txGTID.SequenceNumber != 0 && !r.standalone
	}
	const tail = "START TRANSACTION"
	return len(q) >= len(tail) && strings.EqualFold(q[len(q)-len(tail):], tail)
}

func firstWord(q string) string {
	// Skip a leading /* ... */ comment: servers and tools prefix statements with them. An
	// executable comment's body (/*!50100 RENAME ... */) is the statement: only its marker goes.
	for strings.HasPrefix(q, "/*") {
		if body, ok := strings.CutPrefix(q, "/*!"); ok || strings.HasPrefix(q, "/*M!") {
			if !ok {
				body = q[len("/*M!"):]
			}
			q = strings.TrimSpace(strings.TrimLeft(body, "0123456789"))
			continue
		}
		end := strings.Index(q, "*/")
		if end < 0 {
			return ""
		}
		q = strings.TrimSpace(q[end+2:])
	}
	end := strings.IndexFunc(q, func(c rune) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '(' || c == ';' })
	if end < 0 {
		return q
	}
	return q[:end]
}

func isDML(word string) bool {
	switch word {
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD":
		return true
	}
	return false
}

func isDDL(word string) bool {
	switch word {
	case "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE":
		return true
	}
	return false
}

// commit ends the open transaction: the commit point moves past it and the held event, the
// transaction's last, carries the checkpoint.
func (r *reader) commit(ctx context.Context, h *replication.EventHeader) error {
	r.file, r.pos = r.curFile, h.LogPos
	if r.useGTID {
		switch {
		case r.src.opts.Flavor == MariaDB && r.txGTID.SequenceNumber != 0:
			r.mariaGTID[r.txGTID.DomainID] = r.txGTID
		case r.src.opts.Flavor == MySQL && r.txMySQL != "" && r.mysqlGTID != nil:
			if err := r.mysqlGTID.Update(r.txMySQL); err != nil {
				return fmt.Errorf("mysqlcdc: track GTID set: %w", err)
			}
		}
	}
	r.inTx = false
	if r.txSignals != nil {
		if err := r.signals(ctx); err != nil {
			return err
		}
	}
	if !r.holding {
		r.st.passed(r.file, r.pos) // a transaction of other tables
		if r.rs != nil {
			r.rs.published()
		}
		return nil
	}
	ev := r.held
	r.held, r.holding = cdc.Event{}, false
	ev.Checkpoint = r.checkpoint()
	r.st.delivered(r.file, r.pos)
	err := r.st.send(ctx, ev)
	if r.rs != nil && err == nil {
		r.rs.published()
	}
	return err
}

// emit holds ev and sends the previously held event, which is now known not to be last.
func (r *reader) emit(ctx context.Context, ev cdc.Event) error {
	if r.rs != nil {
		if w := r.rs.win.Load(); w != nil {
			r.observe(w, &ev)
		}
	}
	if !r.holding {
		r.held, r.holding = ev, true
		return nil
	}
	prev := r.held
	r.held = ev
	return r.st.send(ctx, prev)
}

// binlogError wraps go-mysql's errors, whose text carries stack traces, with a readable message
// that keeps the cause reachable through errors.Is and errors.As.
type binlogError struct {
	op  string
	err error
}

func (e *binlogError) Unwrap() error { return e.err }

func (e *binlogError) Error() string {
	op := e.op
	if op == "" {
		op = "read binlog"
	}
	// go-mysql's parse errors quote the event's bytes (row data): only their place is told.
	if ee := (*replication.EventError)(nil); errors.As(e.err, &ee) && ee.Header != nil {
		return fmt.Sprintf("mysqlcdc: %s: cannot parse the %v event ending at %d", op, ee.Header.EventType, ee.Header.LogPos)
	}
	return "mysqlcdc: " + op + ": " + withoutStack(e.err)
}
