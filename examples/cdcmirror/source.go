package main

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/tributary-dev/tributary/cdc"
	"github.com/tributary-dev/tributary/cdc/mysqlcdc"
	"github.com/tributary-dev/tributary/cdc/pgcdc"
)

// newSource builds the configured source. Nothing connects yet: the runner opens it.
func newSource(c *sourceConfig, log *slog.Logger) (cdc.Source, error) {
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
		o := pgcdc.Options{Name: name, Slot: c.Slot, Publication: c.Publication, Snapshot: mode, Logger: log}
		for _, t := range c.Tables {
			schema, table, ok := strings.Cut(t, ".")
			if !ok {
				schema, table = "", t
			}
			o.Tables = append(o.Tables, pgcdc.Table{Schema: schema, Name: table})
		}
		return pgcdc.New(string(c.DSN), o)
	case "mysql":
		dsn, err := parseMySQLDSN(string(c.DSN))
		if err != nil {
			return nil, err
		}
		o := mysqlcdc.Options{Flavor: mysqlcdc.Flavor(c.Flavor), ServerID: c.ServerID, Snapshot: mode, SourceName: name, Logger: log}
		switch c.Positioning {
		case "gtid":
			o.Positioning = mysqlcdc.PositionGTID
		case "file":
			o.Positioning = mysqlcdc.PositionFile
		}
		for _, t := range c.Tables {
			db, table, ok := strings.Cut(t, ".")
			if !ok {
				db, table = dsn.db, t
			}
			if db == "" {
				return nil, errors.New("source.tables: a table without a database (db.table) needs one in the DSN (.../db)")
			}
			o.Tables = append(o.Tables, mysqlcdc.TableName{Database: db, Table: table})
		}
		return mysqlcdc.New(dsn.addr, dsn.user, dsn.password, o)
	}
	return nil, errors.New("source.type: must be postgres or mysql")
}

// mysqlDSN is the part of a Go MySQL driver DSN, user:password@tcp(host:port)/db?params, that
// a binlog reader needs.
type mysqlDSN struct{ user, password, addr, db string }

// parseMySQLDSN reads user:password@tcp(host:port)/db. Its errors never quote the DSN, which
// holds the password. The password may contain '@' and ':' (the last '@' ends it).
func parseMySQLDSN(s string) (mysqlDSN, error) {
	var d mysqlDSN
	bad := errors.New("source.dsn: a MySQL DSN is user:password@tcp(host:port)/db")
	at := strings.LastIndex(s, "@")
	if at < 0 {
		return d, bad
	}
	d.user, d.password, _ = strings.Cut(s[:at], ":")
	rest, ok := strings.CutPrefix(s[at+1:], "tcp(")
	if !ok {
		return d, bad
	}
	d.addr, rest, ok = strings.Cut(rest, ")")
	if !ok || d.addr == "" || d.user == "" {
		return d, bad
	}
	if rest != "" {
		if rest, ok = strings.CutPrefix(rest, "/"); !ok {
			return d, bad
		}
		d.db, _, _ = strings.Cut(rest, "?")
	}
	return d, nil
}
