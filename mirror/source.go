package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/debezium"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
	"github.com/tributary-dev/tributary/queue"
	"github.com/tributary-dev/tributary/queue/kafkaqueue"
	"github.com/tributary-dev/tributary/statestore"
)

// newSource builds pipeline p's source. Nothing connects yet: the runner opens it. st is the
// state file (nil when there is none), which a postgres pipeline's slot and publication names
// are read from (postgresNames).
func newSource(p *PipelineConfig, log *slog.Logger, st statestore.Store) (cdc.Source, error) {
	c := &p.Source
	mode := cdc.SnapshotInitial
	if c.Snapshot == "never" {
		mode = cdc.SnapshotNever
	}
	name := c.Name
	if name == "" {
		name = c.Type
	}
	switch c.Type {
	case "postgres":
		return newPostgres(p, name, mode, log, st)
	case "debezium":
		return newDebezium(p, name, log)
	case "mysql":
		dsn, err := parseMySQLDSN(string(c.DSN))
		if err != nil {
			return nil, err
		}
		o := mysqlcdc.Options{Flavor: mysqlcdc.Flavor(c.Flavor), ServerID: c.ServerID, Snapshot: mode, SourceName: name, Logger: log,
			SnapshotChunk: c.SnapshotChunk}
		if c.SignalTable != "" {
			db, table, err := splitTable(c.SignalTable)
			if err != nil {
				return nil, err
			}
			if db == "" {
				db = dsn.db
			}
			if db == "" {
				return nil, errors.New("source.signal_table: a table without a database (db.table) needs one in the DSN (.../db)")
			}
			o.SignalTable = mysqlcdc.TableName{Database: db, Table: table}
		}
		if o.ServerID == 0 {
			o.ServerID = serverID(p.Name)
		}
		switch c.Positioning {
		case "gtid":
			o.Positioning = mysqlcdc.PositionGTID
		case "file":
			o.Positioning = mysqlcdc.PositionFile
		}
		var tables []mysqlcdc.TableName
		for _, t := range c.Tables {
			db, table, err := splitTable(t)
			if err != nil {
				return nil, err
			}
			if db == "" {
				db = dsn.db
			}
			if db == "" {
				return nil, errors.New("source.tables: a table without a database (db.table) needs one in the DSN (.../db)")
			}
			// "*" is passed through: mysqlcdc captures every table of the database.
			tables = append(tables, mysqlcdc.TableName{Database: db, Table: table})
		}
		return mysqlcdc.New(dsn.addr, dsn.user, dsn.password, tables, &o)
	}
	return nil, errors.New("source.type: must be postgres, mysql or debezium")
}

// newDebezium builds a Debezium source whose streams each join the pipeline's consumer group.
func newDebezium(p *PipelineConfig, name string, log *slog.Logger) (cdc.Source, error) {
	c := &p.Source
	qc := debeziumQueue(p)
	o := debezium.Options{Name: name, Logger: log, InferTypes: c.InferTypes, DecimalStrings: c.DecimalHandling == "string", PlainDates: c.PlainDates}
	switch c.Catalog {
	case "postgres":
		dsn := string(c.DSN)
		o.Catalog = freshCatalog(func(cdc.TableID) (cdc.SchemaLoader, error) {
			return pgcdc.New(dsn, &pgcdc.Options{Name: name})
		})
	case "mysql":
		dsn, err := parseMySQLDSN(string(c.DSN))
		if err != nil {
			return nil, err
		}
		o.Catalog = freshCatalog(func(id cdc.TableID) (cdc.SchemaLoader, error) {
			return mysqlcdc.New(dsn.addr, dsn.user, dsn.password, []mysqlcdc.TableName{{Database: id.Database, Table: id.Table}},
				&mysqlcdc.Options{SourceName: name})
		})
	}
	switch c.Positioning {
	case "gtid":
		o.Versions = debezium.VersionsGTID
	case "file":
		o.Versions = debezium.VersionsFile
	}
	mon, err := kafkaqueue.NewMonitor(qc, nil) // connects on first use
	if err != nil {
		return nil, err
	}
	o.Lag = func(ctx context.Context) (int64, int64, error) {
		l, err := mon.Lag(ctx)
		return l.Head, l.Position, err
	}
	src, err := debezium.New(func(ctx context.Context) (queue.Consumer, error) {
		return kafkaqueue.NewConsumer(ctx, qc, &kafkaqueue.Options{Logger: log})
	}, &o)
	if err != nil {
		mon.Close()
		return nil, err
	}
	return &debeziumSource{Source: src, mon: mon}, nil
}

// debeziumSource is a Debezium source (a cdc.LagReporter, its Options.Lag being set) with its
// group's lag monitor, which Mirror.Close closes.
type debeziumSource struct {
	cdc.Source
	mon *kafkaqueue.Monitor
}

func (d *debeziumSource) Lag(ctx context.Context, cp cdc.Checkpoint) (cdc.SourceLag, error) {
	return d.Source.(cdc.LagReporter).Lag(ctx, cp)
}

func (d *debeziumSource) Close() error { return d.mon.Close() }

// freshCatalog is a cdc.SchemaLoader that reads the catalog anew at every call (the native
// sources cache what they read; a Debezium catalog must see schema changes).
type freshCatalog func(cdc.TableID) (cdc.SchemaLoader, error)

func (f freshCatalog) LoadSchema(ctx context.Context, id cdc.TableID) (*cdc.TableSchema, error) {
	l, err := f(id)
	if err != nil {
		return nil, err
	}
	return l.LoadSchema(ctx, id)
}

// debeziumQueue is the Kafka side of a debezium pipeline: its topics and its group.
func debeziumQueue(p *PipelineConfig) kafkaqueue.Config {
	c := &p.Source
	qc := kafkaqueue.Config{Brokers: c.Brokers, Topics: c.Topics, TopicPattern: c.TopicPattern, Group: debeziumGroup(p),
		// A table's topic appears with its first change: a pattern sees it within this.
		MetadataMaxAge: 30 * time.Second, SessionTimeout: c.SessionTimeout, InstanceID: c.InstanceID}
	if t := c.KafkaTLS; t != nil {
		qc.TLS = &kafkaqueue.TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName}
	}
	if a := c.KafkaSASL; a != nil {
		qc.SASL = &kafkaqueue.SASL{Mechanism: a.Mechanism, Username: a.Username, Password: string(a.Password)}
	}
	return qc
}

// debeziumGroup is the consumer group of a debezium pipeline: its own, or tributary-<pipeline>.
func debeziumGroup(p *PipelineConfig) string {
	if p.Source.Group != "" {
		return p.Source.Group
	}
	return "tributary-" + p.Name
}

func newPostgres(p *PipelineConfig, name string, mode cdc.SnapshotMode, log *slog.Logger, st statestore.Store) (*pgcdc.Source, error) {
	c := &p.Source
	names, _, err := postgresNames(context.Background(), st, p)
	if err != nil {
		return nil, err
	}
	o := pgcdc.Options{Name: name, Slot: names.Slot, Publication: names.Publication, Owner: names.owner,
		Snapshot: mode, SnapshotChunk: c.SnapshotChunk, Logger: log}
	for _, t := range c.Tables {
		schema, table, err := splitTable(t)
		if err != nil {
			return nil, err
		}
		// "*" is passed through: pgcdc captures every table of the schema.
		o.Tables = append(o.Tables, pgcdc.Table{Schema: schema, Name: table})
	}
	return pgcdc.New(string(c.DSN), &o)
}

// pgNamesNamespace and pgNamesKey hold, in the state file, the slot and publication names a
// postgres pipeline reads (pgNames as JSON): fixed at its first start, so later versions and
// configuration edits never move a pipeline off its slot by changing a default.
const (
	pgNamesNamespace = "pgcdc"
	pgNamesKey       = "names"
)

// pgNames are a postgres pipeline's slot and publication, and the owner its publication is
// marked with (pgcdc.Options.Owner; "" without a state file).
type pgNames struct {
	Slot        string `json:"slot"`
	Publication string `json:"publication"`
	owner       string
}

// postgresNames resolves a postgres pipeline's slot and publication (doc.go, Slot and
// publication names): each one source: sets; else the name the state file records; else,
// for a pipeline that has a pgcdc checkpoint but no record (it ran under a version that
// derived both from the source's name), that name, pgcdc.DefaultName(source name), so an
// upgrade keeps the slot holding the changes after its checkpoint; else the pipeline's
// default, postgresDefault. recorded says whether the state file records names equal to
// these. st may be nil (no state file): then nothing is read and no owner is set.
func postgresNames(ctx context.Context, st statestore.Store, p *PipelineConfig) (_ pgNames, recorded bool, _ error) {
	c := &p.Source
	n := pgNames{Slot: postgresDefault(p.Name), Publication: postgresDefault(p.Name)}
	var rec pgNames
	if st != nil {
		n.owner = fmt.Sprintf("pipeline %q of deployment %s", p.Name, st.Identity())
		r, err := st.Get(ctx, p.Name, pgNamesNamespace, pgNamesKey)
		if err != nil {
			return n, false, fmt.Errorf("mirror: reading the slot's name: %w", err)
		}
		switch {
		case r.Revision != 0:
			if err := json.Unmarshal(r.Value, &rec); err != nil || rec.Slot == "" || rec.Publication == "" {
				return n, false, fmt.Errorf("mirror: the state file's record of the slot's name is malformed")
			}
			n.Slot, n.Publication = rec.Slot, rec.Publication
		default:
			cp, err := st.LoadCheckpoint(ctx, p.Name)
			if err != nil {
				return n, false, fmt.Errorf("mirror: reading the checkpoint: %w", err)
			}
			if cp != nil && pgcdc.IsCheckpoint(cp) {
				legacy := pgcdc.DefaultName(sourceName(c))
				n.Slot, n.Publication = legacy, legacy
			}
		}
	}
	if c.Slot != "" {
		n.Slot = c.Slot
	}
	if c.Publication != "" {
		n.Publication = c.Publication
	}
	return n, rec.Slot == n.Slot && rec.Publication == n.Publication, nil
}

// legacyPostgres is a postgres pipeline's source under the names an earlier version derived
// from the source's name (pgcdc.DefaultName), for Inspect while the state file is in use; an
// error when the configuration sets them.
func legacyPostgres(p *PipelineConfig) (*pgcdc.Source, error) {
	if p.Source.Slot != "" || p.Source.Publication != "" {
		return nil, errors.New("mirror: the configuration sets the slot or publication")
	}
	legacy := pgcdc.DefaultName(sourceName(&p.Source))
	return pgcdc.New(string(p.Source.DSN), &pgcdc.Options{Name: sourceName(&p.Source), Slot: legacy, Publication: legacy})
}

// recordPostgresNames records the names postgresNames resolves for p in the state file,
// unless it holds them already.
func recordPostgresNames(ctx context.Context, st statestore.Store, p *PipelineConfig) error {
	n, recorded, err := postgresNames(ctx, st, p)
	if err != nil || recorded {
		return err
	}
	r, err := st.Get(ctx, p.Name, pgNamesNamespace, pgNamesKey)
	if err != nil {
		return fmt.Errorf("mirror: reading the slot's name: %w", err)
	}
	b, _ := json.Marshal(n) // two strings: never fails
	if _, err := st.Put(ctx, p.Name, pgNamesNamespace, pgNamesKey, b, r.Revision); err != nil {
		return fmt.Errorf("mirror: recording the slot's name: %w", err)
	}
	return nil
}

// forgetPostgresNames deletes the record of a postgres pipeline's slot and publication names
// (none is no error): for a pipeline that leaves the native path (Switch to Debezium), whose
// way back then takes the names its prepare step uses, the configuration's or the default.
func forgetPostgresNames(ctx context.Context, st statestore.Store, pipeline string) error {
	r, err := st.Get(ctx, pipeline, pgNamesNamespace, pgNamesKey)
	if err != nil || r.Revision == 0 {
		return err
	}
	return st.Delete(ctx, pipeline, pgNamesNamespace, pgNamesKey, r.Revision)
}

// postgresDefault is a postgres pipeline's default slot and publication name:
// pgcdc.DefaultName of the pipeline's name, cut at 50, then '_' and 8 hexadecimal digits of
// the name's hash -- unique per pipeline, as the MySQL server id is (serverID), also for
// names that differ only in case or in '.' and '-'; at most 59 characters.
func postgresDefault(pipeline string) string {
	base := pgcdc.DefaultName(pipeline)
	if len(base) > 50 {
		base = base[:50]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte("mirror/" + pipeline))
	return fmt.Sprintf("%s_%08x", base, h.Sum32())
}

// serverID derives a MySQL replica id from the pipeline's name, in [1<<24, 1<<31): pipelines
// of one file get different ids without configuring them (mysqlcdc derives its default from
// the source's name, which pipelines may share).
func serverID(pipeline string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("mirror/" + pipeline))
	return 1<<24 + h.Sum32()%(1<<31-1<<24)
}

// mysqlDSN is what a binlog reader needs of a MySQL DSN.
type mysqlDSN struct{ user, password, addr, db string }

var errMySQLDSN = errors.New("a MySQL DSN is user:password@tcp(host:port)/db or mysql://user:password@host:port/db")

// parseMySQLDSN reads the Go driver's form, user:password@tcp(host:port)/db?params (the
// password may hold '@' and ':'; the last '@' ends it), or the URL form
// mysql://user:password@host:port/db (percent-escapes decoded). Parameters are not used;
// tls is refused, since the binlog reader does not speak TLS. Errors never quote the DSN,
// which holds the password.
func parseMySQLDSN(s string) (mysqlDSN, error) {
	var d mysqlDSN
	var params string
	if rest, ok := strings.CutPrefix(s, "mysql://"); ok {
		u, err := url.Parse("mysql://" + rest)
		if err != nil || u.User == nil || u.Host == "" || u.Opaque != "" {
			return d, errMySQLDSN
		}
		d.user = u.User.Username()
		d.password, _ = u.User.Password()
		d.addr = u.Host
		if u.Port() == "" {
			d.addr = net.JoinHostPort(u.Hostname(), "3306")
		}
		d.db = strings.TrimPrefix(u.Path, "/")
		params = u.RawQuery
	} else {
		at := strings.LastIndex(s, "@")
		if at < 0 {
			return d, errMySQLDSN
		}
		d.user, d.password, _ = strings.Cut(s[:at], ":")
		rest, ok := strings.CutPrefix(s[at+1:], "tcp(")
		if !ok {
			return d, errMySQLDSN
		}
		d.addr, rest, ok = strings.Cut(rest, ")")
		if !ok || d.addr == "" {
			return d, errMySQLDSN
		}
		if rest != "" {
			if rest, ok = strings.CutPrefix(rest, "/"); !ok {
				return d, errMySQLDSN
			}
			d.db, params, _ = strings.Cut(rest, "?")
		}
	}
	if d.user == "" || strings.Contains(d.db, "/") {
		return d, errMySQLDSN
	}
	if _, _, err := net.SplitHostPort(d.addr); err != nil {
		return d, errors.New("a MySQL DSN's address is host:port")
	}
	if q, err := url.ParseQuery(params); err == nil {
		if v := q.Get("tls"); v != "" && v != "false" {
			return d, errors.New("the binlog reader does not support TLS (tls= in the DSN)")
		}
	}
	return d, nil
}
