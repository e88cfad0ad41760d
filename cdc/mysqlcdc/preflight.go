package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/tributary-dev/tributary/cdc"
)

// Tables implements cdc.TableLister: the schemas of the captured tables that existed at Open,
// as Open read them from INFORMATION_SCHEMA, in the order of New's tables (the tables of a
// database captured whole in name order, at its entry's place). Tables created later are
// captured too, but not listed.
func (s *stream) Tables() []*cdc.TableSchema {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tables)
}

// preflight checks, before anything else happens, what no retry can change: that the server
// logs row changes with full images, and that every captured table and every database
// captured whole exists as spelled. It returns the captured tables that exist now.
func (s *Source) preflight(ctx context.Context) ([]TableName, error) {
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer quit(conn)
	socket := conn.Conn.Conn
	stop := context.AfterFunc(ctx, func() { _ = socket.Close() })
	defer stop()
	r, err := conn.Execute("SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image")
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("mysqlcdc: read the server's binlog settings: %w", err)
	}
	logBin, _ := r.GetInt(0, 0)
	format, _ := r.GetString(0, 1)
	image, _ := r.GetString(0, 2)
	if err := binlogSettingsProblem(logBin != 0, format, image); err != nil {
		return nil, err
	}
	tables, err := s.resolveTables(ctx, conn, true)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return tables, err
}

// binlogSettingsProblem refuses a server whose binlog cannot give whole row images: without
// them a change is lost (statement events) or half known (partial images). Permanent: only
// the server's configuration can change it.
func binlogSettingsProblem(logBin bool, format, image string) error {
	switch {
	case !logBin:
		return cdc.Permanent(errors.New("mysqlcdc: the server has no binlog (log_bin is off); capture needs log_bin with binlog_format=ROW"))
	case !strings.EqualFold(format, "ROW"):
		return cdc.Permanent(fmt.Errorf("mysqlcdc: the server logs binlog_format=%s; capture needs binlog_format=ROW (set it globally and in the server's configuration)", format))
	case !strings.EqualFold(image, "FULL"):
		return cdc.Permanent(fmt.Errorf("mysqlcdc: the server logs binlog_row_image=%s; capture needs binlog_row_image=FULL (set it globally and in the server's configuration)", image))
	}
	return nil
}

// resolveTables lists the captured tables that exist now, in the order of New's tables: a named
// table at its place, a database captured whole as its tables in name order. With strict, a
// named table or a database captured whole that does not exist as spelled fails with a
// *cdc.StartError naming each, with the name of another case as the fix when there is one:
// capture matches the binlog's names exactly, so a table that exists only in another case
// (lower_case_table_names 0, MariaDB's default on Linux, keeps MyOrders and myorders apart; 1
// stores every name in lower case) would yield no event at all. A database without tables is
// not an error: its tables are captured when they are created.
func (s *Source) resolveTables(ctx context.Context, conn *client.Conn, strict bool) ([]TableName, error) {
	var dbs []string
	for _, t := range s.tables {
		if d := strings.ToLower(t.Database); !slices.Contains(dbs, d) {
			dbs = append(dbs, d)
		}
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(dbs)), ",")
	args := make([]any, len(dbs))
	for i, d := range dbs {
		args[i] = d
	}
	// LOWER on both sides: whether INFORMATION_SCHEMA compares names with or without case
	// depends on the server's settings; the exact comparison is made here.
	r, err := conn.Execute(`SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES
		WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') AND LOWER(TABLE_SCHEMA) IN (`+marks+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("mysqlcdc: look up the captured tables: %w", err)
	}
	found := make([]TableName, 0, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		db, _ := r.GetString(i, 0)
		name, _ := r.GetString(i, 1)
		found = append(found, TableName{Database: db, Table: name})
	}
	slices.SortFunc(found, func(a, b TableName) int {
		if c := strings.Compare(a.Database, b.Database); c != 0 {
			return c
		}
		return strings.Compare(a.Table, b.Table)
	})
	var schemas []string
	if len(s.wholeDBs) > 0 {
		r, err := conn.Execute(`SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE LOWER(SCHEMA_NAME) IN (`+marks+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("mysqlcdc: look up the captured databases: %w", err)
		}
		for i := 0; i < r.RowNumber(); i++ {
			name, _ := r.GetString(i, 0)
			schemas = append(schemas, name)
		}
	}

	var tables []TableName
	var probs []cdc.StartProblem
	for _, t := range s.tables {
		if t.Table == AllTables {
			if !slices.Contains(schemas, t.Database) {
				probs = append(probs, missingDatabase(s.tableID(t), t.Database, schemas))
				continue
			}
			for _, f := range found {
				if f.Database == t.Database && f != s.signalName && !slices.Contains(tables, f) {
					tables = append(tables, f)
				}
			}
			continue
		}
		if slices.Contains(found, t) {
			if !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
			continue
		}
		probs = append(probs, missingTable(s.tableID(t), t, found))
	}
	if strict && len(probs) > 0 {
		return nil, &cdc.StartError{Component: "mysqlcdc", Problems: probs}
	}
	return tables, nil
}

func missingTable(id cdc.TableID, t TableName, found []TableName) cdc.StartProblem {
	p := cdc.StartProblem{Table: id, Problem: "the table does not exist (names are exact: capture compares them with case)",
		Fix: "create it, or remove it from the captured tables"}
	var near []string
	for _, f := range found {
		if strings.EqualFold(f.Database, t.Database) && strings.EqualFold(f.Table, t.Table) {
			near = append(near, quoteIdent(f.Database)+"."+quoteIdent(f.Table))
		}
	}
	if len(near) > 0 {
		p.Fix = "did you mean " + strings.Join(near, " or ") + "?"
	}
	return p
}

func missingDatabase(id cdc.TableID, db string, schemas []string) cdc.StartProblem {
	p := cdc.StartProblem{Table: id, Problem: "the database does not exist (names are exact: capture compares them with case)",
		Fix: "create it, or remove it from the captured tables"}
	var near []string
	for _, s := range schemas {
		if strings.EqualFold(s, db) {
			near = append(near, quoteIdent(s)+".*")
		}
	}
	if len(near) > 0 {
		p.Fix = "did you mean " + strings.Join(near, " or ") + "?"
	}
	return p
}
