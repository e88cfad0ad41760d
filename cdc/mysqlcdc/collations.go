package mysqlcdc

import (
	"context"
	"errors"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// collations maps the server's collation ids to their character sets (lower case): a table
// map names a character column's character set only through its collation id. Read once per
// stream, on the first rows event whose table map carries collations.
type collations map[uint64]string

// errUnknownCollation marks a row image whose table map gives a character column a collation
// id the server does not list: its character set, so its text, cannot be told. Its events are
// delivered Malformed (never decoded under a guessed character set).
var errUnknownCollation = errors.New("mysqlcdc: a column's collation id is not one the server lists " +
	"(INFORMATION_SCHEMA.COLLATIONS); its character set is unknown")

// errBadField is ER_BAD_FIELD_ERROR: COLLATION_CHARACTER_SET_APPLICABILITY has no ID column
// before MariaDB 10.10 (and on MySQL).
const errBadField = 1054

// collations reads every collation id of the server with its character set: those of
// INFORMATION_SCHEMA.COLLATIONS and, on MariaDB 10.10 and later, the ids of
// COLLATION_CHARACTER_SET_APPLICABILITY, where the UCA 14.0.0 collations (utf8mb4_uca1400_ai_ci,
// ...) have theirs (their COLLATIONS row has none). A failed attempt is tried once more on a
// fresh connection (retryOnce).
func (c *catalog) collations(ctx context.Context) (collations, error) {
	return retryOnce(ctx, c, "read the server's collations", c.queryCollations)
}

func (c *catalog) queryCollations() (collations, error) {
	cs := collations{}
	add := func(r *mysql.Result) {
		for i := 0; i < r.RowNumber(); i++ {
			id, err := r.GetUint(i, 0)
			name, _ := r.GetString(i, 1)
			if err == nil && name != "" {
				cs[id] = strings.ToLower(name)
			}
		}
	}
	r, err := c.conn.Execute("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
	if err != nil {
		return nil, err
	}
	add(r)
	if c.src.opts.Flavor == MariaDB {
		r, err = c.conn.Execute("SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY WHERE ID IS NOT NULL")
		var me *mysql.MyError
		switch {
		case err == nil:
			add(r)
		case errors.As(err, &me) && me.Code == errBadField:
		default:
			return nil, err
		}
	}
	return cs, nil
}

// charsetOf returns the character set of collation id (ok false: not one the server lists).
func (cs collations) charsetOf(id uint64) (string, bool) {
	if id == binaryCollation {
		return "binary", true
	}
	name, ok := cs[id]
	return name, ok
}
