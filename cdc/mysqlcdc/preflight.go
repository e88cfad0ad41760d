package mysqlcdc

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tributary-dev/tributary/cdc"
)

// Tables implements cdc.TableLister: the captured tables' schemas as Open read them from
// INFORMATION_SCHEMA, in Options.Tables order.
func (s *stream) Tables() []*cdc.TableSchema {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tables)
}

// checkTables refuses captured tables that do not exist as spelled. Capture matches the
// binlog's names exactly, so a table that exists only in another case (lower_case_table_names
// 0, MariaDB's default on Linux, keeps MyOrders and myorders apart; 1 stores every name in
// lower case) would yield no event at all: the fix names the near match.
func (s *Source) checkTables(ctx context.Context) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer quit(conn)
	socket := conn.Conn.Conn
	stop := context.AfterFunc(ctx, func() { _ = socket.Close() })
	defer stop()
	var dbs []string
	for _, t := range s.opts.Tables {
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
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("mysqlcdc: look up the captured tables: %w", err)
	}
	found := make([]TableName, 0, r.RowNumber())
	for i := 0; i < r.RowNumber(); i++ {
		db, _ := r.GetString(i, 0)
		name, _ := r.GetString(i, 1)
		found = append(found, TableName{Database: db, Table: name})
	}
	var probs []cdc.StartProblem
	for _, t := range s.opts.Tables {
		if slices.Contains(found, t) {
			continue
		}
		p := cdc.StartProblem{Table: s.tableID(t), Problem: "the table does not exist (names are exact: capture compares them with case)",
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
		probs = append(probs, p)
	}
	if len(probs) > 0 {
		return &cdc.StartError{Component: "mysqlcdc", Problems: probs}
	}
	return nil
}
