package mysqlcdc

import (
	"strings"
)

// This file reads the DDL statements that change which relation a table's name denotes:
// RENAME TABLE, ALTER TABLE ... RENAME, DROP TABLE, DROP DATABASE and CREATE TABLE. Only the
// names matter, so the parser is a tokenizer and a few patterns, not a grammar of MySQL.

// ddlKind is what a statement does to the names of tables.
type ddlKind uint8

const (
	ddlOther        ddlKind = iota // no table's relation changes (or not a statement about tables)
	ddlRename                      // RENAME TABLE, ALTER TABLE ... RENAME: ddl.renames
	ddlDrop                        // DROP TABLE: ddl.names
	ddlCreate                      // CREATE [OR REPLACE] TABLE: ddl.names[0]
	ddlDropDatabase                // DROP DATABASE: ddl.database
	ddlAlter                       // ALTER TABLE without RENAME: ddl.names[0] keeps its relation
)

// renamePair is one "from TO to" of a rename.
type renamePair struct{ from, to TableName }

// ddl is a parsed statement.
type ddl struct {
	kind        ddlKind
	renames     []renamePair
	names       []TableName
	database    string
	ifNotExists bool // CREATE TABLE IF NOT EXISTS
	orReplace   bool // CREATE OR REPLACE TABLE
	alters      bool // ALTER TABLE ... RENAME with other clauses: the relation's columns may change too
}

// tokKind is a token's class.
type tokKind uint8

const (
	tokWord   tokKind = iota // an unquoted word (keyword, identifier or number)
	tokIdent                 // a quoted identifier, unquoted
	tokString                // a '...' string literal (its text is not kept)
	tokPunct                 // any other character
)

type token struct {
	kind tokKind
	text string
}

// is says whether t is the unquoted keyword kw (kw in upper case).
func (t token) is(kw string) bool { return t.kind == tokWord && strings.EqualFold(t.text, kw) }

// punct says whether t is the punctuation character c.
func (t token) punct(c byte) bool { return t.kind == tokPunct && len(t.text) == 1 && t.text[0] == c }

// maxDDLTokens bounds the tokens read of one statement: a table DDL's names come first, and
// what follows (column definitions, a CREATE ... SELECT's query) may be long.
const maxDDLTokens = 1 << 16

// tokenize splits a statement into tokens, dropping white space and comments. The body of an
// executable comment (/*! ... */, /*!50100 ... */, /*M! ... */) is read as part of the
// statement, as the server does. ok is false for an unterminated quote or comment.
func tokenize(q string) (toks []token, ok bool) {
	inExec := false // inside an executable comment: its "*/" is skipped
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '*' && inExec && i+1 < len(q) && q[i+1] == '/':
			inExec = false
			i += 2
		case c == '/' && i+1 < len(q) && q[i+1] == '*':
			body := q[i+2:]
			if !inExec && (strings.HasPrefix(body, "!") || strings.HasPrefix(body, "M!")) {
				j := i + 2 + strings.IndexByte(body, '!') + 1
				for j < len(q) && q[j] >= '0' && q[j] <= '9' {
					j++
				}
				inExec = true
				i = j
				continue
			}
			end := strings.Index(body, "*/")
			if end < 0 {
				return toks, false
			}
			i += 2 + end + 2
		case c == '#' || c == '-' && strings.HasPrefix(q[i:], "--") && (i+2 == len(q) || isSpaceByte(q[i+2])):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				i = len(q)
			} else {
				i += end + 1
			}
		case c == '`' || c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(q); j++ {
				if q[j] != c {
					b.WriteByte(q[j])
					continue
				}
				if j+1 < len(q) && q[j+1] == c {
					b.WriteByte(c)
					j++
					continue
				}
				break
			}
			if j >= len(q) {
				return toks, false
			}
			toks = append(toks, token{kind: tokIdent, text: b.String()})
			i = j + 1
		case c == '\'':
			j := i + 1
			for ; j < len(q); j++ {
				if q[j] == '\\' {
					j++
					continue
				}
				if q[j] == '\'' {
					if j+1 < len(q) && q[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(q) {
				return toks, false
			}
			toks = append(toks, token{kind: tokString})
			i = j + 1
		case isIdentByte(c):
			j := i
			for j < len(q) && isIdentByte(q[j]) {
				j++
			}
			toks = append(toks, token{kind: tokWord, text: q[i:j]})
			i = j
		default:
			toks = append(toks, token{kind: tokPunct, text: q[i : i+1]})
			i++
		}
		if len(toks) >= maxDDLTokens {
			return toks, true
		}
	}
	return toks, !inExec
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// ddlParser reads tokens.
type ddlParser struct {
	toks      []token
	i         int
	defaultDB string
	fold      bool // lower_case_table_names 1: names compare in lower case
}

func (p *ddlParser) peek() token {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return token{kind: tokPunct}
}

func (p *ddlParser) done() bool { return p.i >= len(p.toks) }

// accept consumes the keyword kw when it is next.
func (p *ddlParser) accept(kw string) bool {
	if p.peek().is(kw) {
		p.i++
		return true
	}
	return false
}

// acceptAll consumes the keywords kws when they are all next, in order.
func (p *ddlParser) acceptAll(kws ...string) bool {
	for k, kw := range kws {
		if p.i+k >= len(p.toks) || !p.toks[p.i+k].is(kw) {
			return false
		}
	}
	p.i += len(kws)
	return true
}

// ident reads one identifier: a quoted one, or an unquoted word that is not a number.
func (p *ddlParser) ident() (string, bool) {
	t := p.peek()
	switch {
	case t.kind == tokIdent && t.text != "":
		p.i++
		return t.text, true
	case t.kind == tokWord && !allDigits(t.text):
		p.i++
		return t.text, true
	}
	return "", false
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// name reads [db.]table. An unqualified name is of the default database.
func (p *ddlParser) name() (TableName, bool) {
	first, ok := p.ident()
	if !ok {
		return TableName{}, false
	}
	n := TableName{Database: p.defaultDB, Table: first}
	if p.peek().punct('.') {
		p.i++
		tbl, ok := p.ident()
		if !ok {
			return TableName{}, false
		}
		n = TableName{Database: first, Table: tbl}
	}
	if n.Database == "" {
		return TableName{}, false
	}
	if p.fold {
		n.Database, n.Table = strings.ToLower(n.Database), strings.ToLower(n.Table)
	}
	return n, true
}

// waitClause skips MariaDB's WAIT n | NOWAIT.
func (p *ddlParser) waitClause() {
	if p.accept("NOWAIT") {
		return
	}
	if p.peek().is("WAIT") && p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokWord && allDigits(p.toks[p.i+1].text) {
		p.i += 2
	}
}

// parseDDL reads a DDL statement that may change which relation a table's name denotes;
// defaultDB is the database the statement ran in (the Query event's), fold says names are
// compared in lower case (lower_case_table_names). ok is false for a statement about tables
// (RENAME TABLE, ALTER/DROP/CREATE TABLE) that the parser cannot read: its caller cannot tell
// which names it changed.
func parseDDL(q, defaultDB string, fold bool) (d ddl, ok bool) {
	toks, complete := tokenize(q)
	p := &ddlParser{toks: toks, defaultDB: defaultDB, fold: fold}
	switch {
	case p.accept("RENAME"):
		if !p.accept("TABLE") && !p.accept("TABLES") {
			return ddl{}, true // RENAME USER
		}
		if !complete {
			return ddl{}, false
		}
		return p.rename()
	case p.accept("ALTER"):
		p.accept("ONLINE")
		p.accept("IGNORE")
		if !p.accept("TABLE") {
			return ddl{}, true // ALTER DATABASE, VIEW, USER, SEQUENCE, ...
		}
		if !complete {
			return ddl{}, false
		}
		return p.alter()
	case p.accept("DROP"):
		if p.accept("DATABASE") || p.accept("SCHEMA") {
			if !complete {
				return ddl{}, false
			}
			p.acceptAll("IF", "EXISTS")
			db, ok := p.ident()
			if !ok {
				return ddl{}, false
			}
			if fold {
				db = strings.ToLower(db)
			}
			return ddl{kind: ddlDropDatabase, database: db}, true
		}
		if p.accept("TEMPORARY") {
			return ddl{}, true // a session's own table, never in the binlog's row events
		}
		if !p.accept("TABLE") && !p.accept("TABLES") {
			return ddl{}, true
		}
		if !complete {
			return ddl{}, false
		}
		return p.drop()
	case p.accept("CREATE"):
		orReplace := p.acceptAll("OR", "REPLACE")
		if p.accept("TEMPORARY") {
			return ddl{}, true
		}
		if !p.accept("TABLE") {
			return ddl{}, true // CREATE DATABASE, INDEX, VIEW, ...
		}
		d := ddl{kind: ddlCreate, orReplace: orReplace}
		d.ifNotExists = p.acceptAll("IF", "NOT", "EXISTS")
		// The name comes first: the rest (columns, SELECT) may be cut at maxDDLTokens.
		n, ok := p.name()
		if !ok {
			return ddl{}, false
		}
		d.names = []TableName{n}
		return d, true
	}
	return ddl{}, true
}

// rename reads the rest of RENAME TABLE[S] [IF EXISTS] a [WAIT n|NOWAIT] TO b [, c TO d ...].
func (p *ddlParser) rename() (ddl, bool) {
	d := ddl{kind: ddlRename}
	p.acceptAll("IF", "EXISTS")
	for {
		from, ok := p.name()
		if !ok {
			return ddl{}, false
		}
		p.waitClause()
		if !p.accept("TO") {
			return ddl{}, false
		}
		to, ok := p.name()
		if !ok {
			return ddl{}, false
		}
		d.renames = append(d.renames, renamePair{from: from, to: to})
		if p.peek().punct(',') {
			p.i++
			continue
		}
		if p.peek().punct(';') {
			p.i++
		}
		return d, p.done()
	}
}

// alter reads the rest of ALTER TABLE [IF EXISTS] a [WAIT n|NOWAIT] spec [, spec ...], where
// one spec may be RENAME [TO|AS] b (not RENAME COLUMN, INDEX, KEY or CONSTRAINT). Without it
// the relation keeps its name (ddlAlter: its columns may change); with other specs besides
// it, alters is set.
func (p *ddlParser) alter() (ddl, bool) {
	p.acceptAll("IF", "EXISTS")
	from, ok := p.name()
	if !ok {
		return ddl{}, false
	}
	p.waitClause()
	var to *TableName
	depth, specStart, others := 0, true, false
	for !p.done() {
		t := p.peek()
		switch {
		case t.punct('('):
			depth++
		case t.punct(')'):
			depth--
		case t.punct(',') && depth == 0:
			specStart = true
			p.i++
			continue
		case specStart && depth == 0 && t.is("RENAME"):
			p.i++
			next := p.peek()
			if next.is("COLUMN") || next.is("INDEX") || next.is("KEY") || next.is("CONSTRAINT") {
				others = others || next.is("COLUMN")
				break
			}
			if !p.accept("TO") {
				p.accept("AS")
			}
			n, ok := p.name()
			if !ok {
				return ddl{}, false
			}
			to = &n
			specStart = false
			continue
		case specStart && depth == 0 && !t.punct(';') && !t.is("ALGORITHM") && !t.is("LOCK"):
			others = true // a clause that may change the columns (ALGORITHM and LOCK do not)
		}
		specStart = false
		p.i++
	}
	if to == nil {
		return ddl{kind: ddlAlter, names: []TableName{from}}, true
	}
	return ddl{kind: ddlRename, renames: []renamePair{{from: from, to: *to}}, alters: others}, true
}

// drop reads the rest of DROP TABLE[S] [IF EXISTS] a [, b ...] [WAIT n|NOWAIT] [RESTRICT|CASCADE].
func (p *ddlParser) drop() (ddl, bool) {
	d := ddl{kind: ddlDrop}
	p.acceptAll("IF", "EXISTS")
	for {
		n, ok := p.name()
		if !ok {
			return ddl{}, false
		}
		d.names = append(d.names, n)
		if p.peek().punct(',') {
			p.i++
			continue
		}
		break
	}
	p.waitClause()
	if !p.accept("RESTRICT") {
		p.accept("CASCADE")
	}
	if p.peek().punct(';') {
		p.i++
	}
	return d, p.done()
}

// renameEffects is a RENAME statement's net effect on names: the statement is atomic, so a
// name it uses only in passing (the tmp of a swap) never held anything a reader saw.
type renameEffect struct {
	name TableName
	// before is the name whose relation the name held before the statement (itself) or empty;
	// after is the original name of the relation it holds after it, or empty.
	before, after *TableName
	// dest is, when before is set, where before's relation ends.
	dest TableName
}

// netRenames computes the net effect of a sequence of renames, one entry per name whose
// relation changes, in the order the statement first mentions them.
func netRenames(pairs []renamePair) []renameEffect {
	type slot struct {
		origin  TableName
		present bool
	}
	cur := map[TableName]slot{}
	var order []TableName
	before := map[TableName]bool{} // held a relation before the statement
	mention := func(n TableName, source bool) {
		if _, seen := cur[n]; seen {
			return
		}
		order = append(order, n)
		cur[n] = slot{origin: n, present: source}
		before[n] = source
	}
	for _, pr := range pairs {
		mention(pr.from, true)
		mention(pr.to, false)
		s := cur[pr.from]
		cur[pr.from] = slot{}
		cur[pr.to] = s
	}
	dest := map[TableName]TableName{}
	for _, n := range order {
		if s := cur[n]; s.present {
			dest[s.origin] = n
		}
	}
	var out []renameEffect
	for _, n := range order {
		s := cur[n]
		if before[n] && s.present && s.origin == n {
			continue // unchanged
		}
		if !before[n] && !s.present {
			continue // used in passing
		}
		e := renameEffect{name: n}
		if before[n] {
			b := n
			e.before = &b
			e.dest = dest[n]
		}
		if s.present {
			a := s.origin
			e.after = &a
		}
		out = append(out, e)
	}
	return out
}
