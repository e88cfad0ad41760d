package mysqlcdc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/tributary-dev/tributary/cdc"
)

// truncate turns a TRUNCATE statement on a captured table into a cdc.Truncate event. The
// statement is its own transaction in the binlog (it commits implicitly), so the event is
// the transaction's last and query's commit gives it the checkpoint, as for any DDL.
func (r *reader) truncate(ctx context.Context, h *replication.EventHeader, e *replication.QueryEvent, q string) error {
	name, ok := truncatedTable(q, string(e.Schema))
	if !ok {
		// Only a statement this parser does not understand gets here; its rows stay in the
		// mirror, which is worth a warning (the statement itself may carry data, so not it).
		r.src.log.Warn("mysqlcdc: cannot tell which table a TRUNCATE statement names; it produces no event",
			"source", r.src.opts.SourceName, "file", r.curFile, "pos", h.LogPos)
		return nil
	}
	if !r.src.captures(name) {
		return nil
	}
	id := r.src.tableID(name)
	// TRUNCATE keeps the columns, so the cached schema is still right, else the last
	// description the stream had of the name (the catalog may describe a later relation by now,
	// for a reader behind the DDL); a table first seen here is loaded. A table dropped since (a
	// replay) has none: the event needs no row. A description older than an ALTER TABLE the
	// stream read since gives no columns (tableNow), the relation's identity kept.
	t := r.tables[name]
	if l := r.rel.last[name]; t == nil && l != nil {
		// Perhaps described under the name it had before a rename: named and bound here.
		s := *l.schema
		if r.rel.stale[name] {
			s = cdc.TableSchema{}
		}
		s.ID, s.Relation = id, r.rel.ids[name]
		t = &table{schema: &s}
	}
	if t == nil {
		var err error
		if t, err = r.cat.load(ctx, id); err != nil && !errors.Is(err, errNoTable) {
			return err
		}
		if t != nil {
			r.adopt(name, t)
		}
	}
	if r.txID == "" {
		r.txID = fmt.Sprintf("%s:%d", r.curFile, h.LogPos-h.EventSize)
	}
	ev := cdc.Event{Op: cdc.Truncate, Table: id, CommitTime: r.txTime, TxID: r.txID,
		Position: r.position(h, r.txRows)}
	if t != nil {
		ev.Schema = t.schema
	}
	r.txRows++
	return r.emit(ctx, ev)
}

// truncatedTable reads the table name of "TRUNCATE [TABLE] [db.]tbl ...", with backtick or
// ANSI double quotes and comments anywhere between the words; defaultDB is the database the
// statement ran in. MySQL and MariaDB truncate one table per statement.
func truncatedTable(q, defaultDB string) (TableName, bool) {
	s := skipBlanks(q)
	word, s := nextWord(s)
	if !strings.EqualFold(word, "TRUNCATE") {
		return TableName{}, false
	}
	s = skipBlanks(s)
	if word, rest := nextWord(s); strings.EqualFold(word, "TABLE") {
		s = skipBlanks(rest)
	}
	first, s, ok := identifier(s)
	if !ok {
		return TableName{}, false
	}
	if rest := skipBlanks(s); strings.HasPrefix(rest, ".") {
		tbl, _, ok := identifier(skipBlanks(rest[1:]))
		if !ok {
			return TableName{}, false
		}
		return TableName{Database: first, Table: tbl}, true
	}
	if defaultDB == "" {
		return TableName{}, false
	}
	return TableName{Database: defaultDB, Table: first}, true
}

// skipBlanks skips white space and comments: /* ... */, "-- " and "#" to the end of the line.
func skipBlanks(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n\f\v")
		switch {
		case strings.HasPrefix(s, "/*"):
			end := strings.Index(s[2:], "*/")
			if end < 0 {
				return ""
			}
			s = s[2+end+2:]
		case strings.HasPrefix(s, "#"), strings.HasPrefix(s, "-- "), s == "--":
			end := strings.IndexByte(s, '\n')
			if end < 0 {
				return ""
			}
			s = s[end+1:]
		default:
			return s
		}
	}
}

// nextWord splits off a leading unquoted word.
func nextWord(s string) (word, rest string) {
	i := 0
	for i < len(s) && isIdentByte(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

// identifier splits off a leading identifier, unquoting a backtick- or double-quoted one (a
// doubled quote character stands for itself).
func identifier(s string) (name, rest string, ok bool) {
	if s == "" {
		return "", "", false
	}
	if quote := s[0]; quote == '`' || quote == '"' {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != quote {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == quote {
				b.WriteByte(quote)
				i++
				continue
			}
			return b.String(), s[i+1:], b.Len() > 0
		}
		return "", "", false // unterminated
	}
	name, rest = nextWord(s)
	return name, rest, name != ""
}

// isIdentByte says whether c may appear in an unquoted identifier; bytes of multi-byte UTF-8
// characters all may.
func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}
